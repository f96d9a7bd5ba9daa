//! Arrow IPC frames in and out of a guest: decoded without copying the column
//! buffers or re-validating them, encoded into one allocation sized up front.
//! Shared by the Rust SDK and weir's columnar kernels (`#[path]` there).

use std::io::Cursor;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_schema::{ArrowError, SchemaRef};

/// Why a frame could not be read or written.
#[derive(Debug)]
pub enum Error {
    /// The bytes are not an Arrow IPC stream (the input's fault).
    Malformed(String),
    /// arrow-rs refused (a bug, or memory).
    Arrow(ArrowError),
}

impl From<ArrowError> for Error {
    fn from(e: ArrowError) -> Self {
        Self::Arrow(e)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Malformed(m) => f.write_str(m),
            Error::Arrow(e) => e.fmt(f),
        }
    }
}

/// Decodes one frame into its record batches, without copying the column
/// buffers out of the frame; a frame of no batches gives one empty batch, so
/// its schema is not lost. Also gives back the frame's bytes, which the
/// batches share.
///
/// The frame's messages are walked here and each read with arrow-ipc's
/// `FileDecoder`: its `StreamDecoder` (arrow 60.1) drops the skip-validation
/// flag for record batches, and so checked every string of every frame.
pub fn decode_batches(frame: Vec<u8>) -> Result<(Vec<RecordBatch>, Buffer), Error> {
    use arrow_ipc::MessageHeader;
    use arrow_ipc::reader::FileDecoder;

    let whole = Buffer::from_vec(frame);
    let (mut at, mut decoder, mut schema, mut batches) = (0, None::<FileDecoder>, None, Vec::new());
    let no_schema = || Error::Malformed("a table frame holds no Arrow schema".into());
    while let Some((block, message)) = next_message(&whole, at)? {
        let bytes = whole.slice(at);
        match message.header_type() {
            MessageHeader::Schema => {
                let fields = message.header_as_schema().ok_or_else(no_schema)?;
                let fields = schema.insert(Arc::new(arrow_ipc::convert::try_fb_to_schema(fields)?));
                // SAFETY: frames come from the weir host, which builds them from arrays it
                // validated (decoded from Kafka messages or read from checked files).
                // Re-validating every offset and UTF-8 string here would double the cost
                // of a passthrough; the host does validate everything a plugin returns.
                decoder =
                    Some(unsafe { FileDecoder::new(fields.clone(), message.version()).with_skip_validation(true) });
            }
            MessageHeader::DictionaryBatch => {
                decoder.as_mut().ok_or_else(no_schema)?.read_dictionary(&block, &bytes)?
            }
            MessageHeader::RecordBatch => {
                batches.extend(decoder.as_ref().ok_or_else(no_schema)?.read_record_batch(&block, &bytes)?)
            }
            _ => {}
        }
        at += block.metaDataLength() as usize + block.bodyLength() as usize;
    }
    let schema = schema.ok_or_else(no_schema)?;
    if batches.is_empty() {
        batches.push(RecordBatch::new_empty(schema));
    }
    Ok((batches, whole))
}

/// The message at `at` of an IPC stream, and the block it takes there (its
/// prefix and metadata, then its body); `None` at the end of the stream.
fn next_message(stream: &[u8], at: usize) -> Result<Option<(arrow_ipc::Block, arrow_ipc::Message<'_>)>, Error> {
    let truncated = || Error::Malformed(format!("a table frame ends inside its message at byte {at}"));
    let rest = &stream[at..];
    if rest.is_empty() {
        return Ok(None); // a stream may end without its end-of-stream marker
    }
    let prefix = if rest.starts_with(&[0xff; 4]) { 8 } else { 4 };
    let length = rest.get(prefix - 4..prefix).ok_or_else(truncated)?;
    let length = i32::from_le_bytes(length.try_into().expect("four bytes"));
    let length = usize::try_from(length)
        .map_err(|_| Error::Malformed(format!("a table frame's message at byte {at} has a negative length")))?;
    if length == 0 {
        return Ok(None);
    }
    let metadata = rest.get(prefix..prefix + length).ok_or_else(truncated)?;
    let message = arrow_ipc::root_as_message(metadata)
        .map_err(|e| Error::Malformed(format!("a table frame's message at byte {at}: {e}")))?;
    let body = usize::try_from(message.bodyLength()).map_err(|_| truncated())?;
    if rest.len() < prefix + length + body {
        return Err(truncated());
    }
    Ok(Some((arrow_ipc::Block::new(at as i64, (prefix + length) as i32, body as i64), message)))
}

/// The bytes an array's buffers take in an IPC stream, or a little more: each
/// padded to 64 bytes. Only the rows of a slice count (the IPC writer writes
/// no more), and not `get_array_memory_size`: arrays decoded zero-copy share
/// their frame's allocation, whose whole capacity that would count once per
/// column.
fn ipc_len(data: &arrow_data::ArrayData) -> usize {
    fn buffers(data: &arrow_data::ArrayData) -> usize {
        data.buffers().len()
            + usize::from(data.nulls().is_some())
            + data.child_data().iter().map(buffers).sum::<usize>()
    }
    fn whole(data: &arrow_data::ArrayData) -> usize {
        let own: usize = data.buffers().iter().map(|b| b.len()).sum();
        own + data.nulls().map_or(0, |n| n.buffer().len()) + data.child_data().iter().map(whole).sum::<usize>()
    }
    data.get_slice_memory_size().unwrap_or_else(|_| whole(data)) + 64 * buffers(data)
}

/// What an IPC stream of `batches` takes, or a little more. The output is
/// sized once: a `Vec` that outgrows its capacity doubles, and the guest then
/// holds the output three times over (measured: 495 MB of guest memory for a
/// 124 MB frame before this estimate counted padding and metadata).
pub fn ipc_size(schema: &SchemaRef, batches: &[RecordBatch]) -> usize {
    let buffers: usize = batches.iter().flat_map(|b| b.columns()).map(|c| ipc_len(&c.to_data())).sum();
    let metadata: usize = batches.iter().map(|b| 1024 + 256 * b.num_columns()).sum();
    buffers + metadata + 4096 + 256 * schema.fields().len()
}

/// One IPC stream of `batches`, in one allocation sized by [`ipc_size`].
pub fn encode(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Vec<u8>, ArrowError> {
    let size = ipc_size(schema, batches);
    let mut writer = arrow_ipc::writer::StreamWriter::try_new(Cursor::new(Vec::with_capacity(size)), schema)?;
    for batch in batches {
        writer.write(batch)?;
    }
    Ok(writer.into_inner()?.into_inner())
}
