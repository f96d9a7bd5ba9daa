//! Table frames: Arrow IPC *stream* bytes, the form tables take when they cross
//! into and out of a plugin.

use arrow::array::{ArrayData, RecordBatch};
use arrow::buffer::Buffer;
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::ipc::reader::StreamDecoder;
use arrow::ipc::writer::StreamWriter;

/// One table, decoded from a frame: its schema and its record batches.
#[derive(Debug, Clone)]
pub struct Frame {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
}

impl Frame {
    pub fn rows(&self) -> u64 {
        self.batches.iter().map(|b| b.num_rows() as u64).sum()
    }
}

/// Encodes `batches` (all of `schema`) as one IPC stream.
pub fn encode(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Vec<u8>, ArrowError> {
    let mut writer = StreamWriter::try_new(Vec::with_capacity(ipc_size(schema, batches)), schema)?;
    for batch in batches {
        writer.write(batch)?;
    }
    writer.into_inner()
}

/// What an IPC stream of `batches` takes, or a little more: every buffer
/// padded to 64 bytes, and room for each message's metadata. The stream is
/// sized once: a `Vec` that outgrows its capacity doubles, holding the frame
/// three times over while it copies.
pub fn ipc_size(schema: &SchemaRef, batches: &[RecordBatch]) -> usize {
    fn buffers(data: &ArrayData) -> usize {
        let padded = |len: usize| len.div_ceil(64) * 64;
        let own: usize = data.buffers().iter().map(|b| padded(b.len())).sum();
        let nulls = data.nulls().map_or(0, |n| padded(n.buffer().len()));
        own + nulls + data.child_data().iter().map(buffers).sum::<usize>()
    }
    let data: usize = batches.iter().flat_map(|b| b.columns()).map(|c| buffers(&c.to_data())).sum();
    let metadata: usize = batches.iter().map(|b| 1024 + 256 * b.num_columns()).sum();
    data + metadata + 4096 + 256 * schema.fields().len()
}

/// Decodes one IPC stream, without copying the column buffers: the batches
/// point into `bytes`. Everything is validated (offsets, UTF-8), since frames
/// can come from a plugin.
pub fn decode(bytes: Vec<u8>) -> Result<Frame, ArrowError> {
    decode_buffer(Buffer::from_vec(bytes), StreamDecoder::new())
}

/// Rows per record batch of a frame the host makes from smaller runs: a
/// plugin's SDK hands each record batch to its author as it is.
pub const BATCH_ROWS: usize = 64 * 1024;

/// A table to be framed only when it is handed over. A batch's partitions are
/// then framed one at a time, as a plugin reads them, instead of all at once
/// beside the rows they are made from.
#[derive(Debug)]
pub struct Unframed {
    pub schema: SchemaRef,
    /// The rows in order, in batches of any size (the runs they were decoded in).
    pub batches: Vec<RecordBatch>,
}

impl Unframed {
    /// The frame: the rows regrouped into record batches of up to
    /// [`BATCH_ROWS`], each batch let go of once encoded, in one stream sized once.
    pub fn encode(self) -> Result<Vec<u8>, ArrowError> {
        let Self { schema, batches } = self;
        let mut writer = StreamWriter::try_new(Vec::with_capacity(ipc_size(&schema, &batches)), &schema)?;
        let mut batches = batches.into_iter().peekable();
        loop {
            let (mut group, mut rows) = (Vec::new(), 0);
            while let Some(batch) = batches.next_if(|b| rows == 0 || rows + b.num_rows() <= BATCH_ROWS) {
                rows += batch.num_rows();
                group.push(batch);
            }
            match group.len() {
                0 => break,
                1 => writer.write(&group[0])?,
                // Joining fails only when a string column would pass 2 GiB: then
                // the runs go as they are, smaller batches but the same rows.
                _ => match concat_batches(&schema, &group) {
                    Ok(joined) => writer.write(&joined)?,
                    Err(_) => group.iter().try_for_each(|run| writer.write(run))?,
                },
            }
        }
        writer.into_inner()
    }
}

fn decode_buffer(mut buffer: Buffer, mut decoder: StreamDecoder) -> Result<Frame, ArrowError> {
    let mut batches = Vec::new();
    while !buffer.is_empty() {
        if let Some(batch) = decoder.decode(&mut buffer)? {
            batches.push(batch);
        }
    }
    decoder.finish()?;
    let schema =
        decoder.schema().ok_or_else(|| ArrowError::IpcError("the stream ends before its schema message".into()))?;
    Ok(Frame { schema, batches })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, AsArray, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};

    use super::*;

    #[test]
    fn round_trip_keeps_batches_and_empty_tables() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from(vec![1, 2])), Arc::new(StringArray::from(vec![Some("a"), None]))],
        )
        .unwrap();
        let frame = decode(encode(&schema, &[batch.clone(), batch.clone()]).unwrap()).unwrap();
        assert_eq!(frame.batches, vec![batch.clone(), batch]);
        assert_eq!(frame.rows(), 4);

        let empty = decode(encode(&schema, &[]).unwrap()).unwrap();
        assert_eq!(empty.schema, schema);
        assert_eq!(empty.rows(), 0);
    }

    #[test]
    fn a_stream_is_sized_once_even_when_its_metadata_outweighs_its_data() {
        // Many small batches of many columns: each message's metadata is larger
        // than its buffers, so an estimate of buffers alone comes out short.
        let fields: Vec<Field> = (0..24).map(|i| Field::new(format!("c{i}"), DataType::Int64, false)).collect();
        let schema = Arc::new(Schema::new(fields));
        let columns: Vec<ArrayRef> = (0..24).map(|i| Arc::new(Int64Array::from(vec![i])) as ArrayRef).collect();
        let batches = vec![RecordBatch::try_new(schema.clone(), columns).unwrap(); 40];
        let bytes = encode(&schema, &batches).unwrap();
        assert!(
            bytes.len() <= ipc_size(&schema, &batches),
            "{} bytes against an estimate of {}",
            bytes.len(),
            ipc_size(&schema, &batches)
        );
        assert_eq!(bytes.capacity(), ipc_size(&schema, &batches), "the buffer never regrew");
    }

    #[test]
    fn an_unframed_table_is_framed_in_batches_of_up_to_batch_rows_in_order() {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let run = |from: i64, n: i64| {
            RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from_iter_values(from..from + n))]).unwrap()
        };
        let big = BATCH_ROWS as i64;
        // Small runs are joined up to BATCH_ROWS; a run that would pass it starts the next batch.
        let runs = vec![run(0, 10), run(10, big - 20), run(big - 10, 10), run(big, 5), run(big + 5, big)];
        let frame = decode(Unframed { schema: schema.clone(), batches: runs }.encode().unwrap()).unwrap();
        let sizes: Vec<usize> = frame.batches.iter().map(RecordBatch::num_rows).collect();
        assert_eq!(sizes, [BATCH_ROWS, 5, BATCH_ROWS]);
        let ids: Vec<i64> =
            frame.batches.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect();
        assert_eq!(ids, (0..2 * big + 5).collect::<Vec<_>>());
        let empty = decode(Unframed { schema: schema.clone(), batches: vec![] }.encode().unwrap()).unwrap();
        assert_eq!((empty.rows(), empty.schema), (0, schema));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(decode(b"not arrow".to_vec()).is_err());
        assert!(decode(vec![]).is_err());
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
        let mut bytes = encode(&schema, &[]).unwrap();
        bytes.truncate(bytes.len() - 12);
        assert!(decode(bytes).is_err(), "a truncated stream is an error");
    }
}
