//! Table frames: Arrow IPC *stream* bytes, the form tables take when they cross
//! into and out of a plugin.

use arrow::array::{ArrayData, RecordBatch};
use arrow::buffer::Buffer;
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

/// Encodes batches as one frame of `size` bytes (see [`ipc_size`]), letting go
/// of each once written, and reads them back: the rows returned point into the
/// frame, so rows that are both handed to a plugin and kept by the host are
/// held once, not twice.
pub fn share(
    schema: &SchemaRef,
    batches: impl IntoIterator<Item = Result<RecordBatch, ArrowError>>,
    size: usize,
) -> Result<(Buffer, Vec<RecordBatch>), ArrowError> {
    let mut writer = StreamWriter::try_new(Vec::with_capacity(size), schema)?;
    for batch in batches {
        writer.write(&batch?)?;
    }
    let frame = Buffer::from_vec(writer.into_inner()?);
    // SAFETY: the frame was just written from batches whose arrays are valid, and
    // a `Buffer` is immutable: reading it back finds exactly those arrays.
    let decoder = unsafe { StreamDecoder::new().with_skip_validation(true) };
    Ok((frame.clone(), decode_buffer(frame, decoder)?.batches))
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

    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

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
    fn shared_rows_point_into_their_frame() {
        let schema = Arc::new(Schema::new(vec![Field::new("name", DataType::Utf8, true)]));
        let batch =
            RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(vec![Some("a"), None]))]).unwrap();
        let both = [batch.clone(), batch.clone()];
        let (frame, rows) = share(&schema, both.clone().map(Ok), ipc_size(&schema, &both)).unwrap();
        assert_eq!(rows, both);
        assert_eq!(decode(frame.to_vec()).unwrap().batches, both);
        let values = rows[1].column(0).to_data().buffers()[1].as_ptr();
        assert!(frame.as_ptr_range().contains(&values), "the rows are read from the frame, not copied");
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
