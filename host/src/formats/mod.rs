//! Kafka messages to Arrow rows: what every format shares. One module per
//! format (`json`, with `json_schema` for its declared schema) turns a run of
//! messages into record batches of the declared columns, plus where each row
//! came from; a message that does not decode becomes a dead letter, never a
//! failed batch.
//!
//! Every row also carries where it came from, in these columns after the
//! declared ones:
//!
//! | column       | type                        | what                                  |
//! |--------------|-----------------------------|---------------------------------------|
//! | `_partition` | `Int32`                     | the Kafka partition                   |
//! | `_offset`    | `Int64`                     | the message's offset in the partition |
//! | `_timestamp` | `Timestamp(ms, "+00:00")`   | the message's timestamp, if it has one |
//! | `_key`       | `Binary`                    | the message's key, if it has one      |

pub mod json;
pub mod json_schema;

use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, TimeUnit};

/// One Kafka message, as consumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawMessage {
    pub partition: i32,
    pub offset: i64,
    /// Milliseconds since the epoch.
    pub timestamp: Option<i64>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// The key, then the value, in one allocation: the consumer copies every
    /// message, and one allocation a message instead of two is measurably faster.
    bytes: Vec<u8>,
    /// The key's length, if there is a key.
    key_len: Option<usize>,
    /// Whether there is a value (a tombstone has none).
    has_payload: bool,
}

impl RawMessage {
    pub fn new(
        partition: i32,
        offset: i64,
        timestamp: Option<i64>,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
        headers: Vec<(String, Option<Vec<u8>>)>,
    ) -> Self {
        let (k, v) = (key.unwrap_or_default(), payload.unwrap_or_default());
        let mut bytes = Vec::with_capacity(k.len() + v.len());
        bytes.extend_from_slice(k);
        bytes.extend_from_slice(v);
        Self {
            partition,
            offset,
            timestamp,
            headers,
            bytes,
            key_len: key.map(<[u8]>::len),
            has_payload: payload.is_some(),
        }
    }

    pub fn key(&self) -> Option<&[u8]> {
        self.key_len.map(|len| &self.bytes[..len])
    }

    pub fn payload(&self) -> Option<&[u8]> {
        self.has_payload.then(|| &self.bytes[self.key_len.unwrap_or(0)..])
    }

    /// The bytes it holds, as counted against `kafka.size_rollover_mb`.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }
}

/// A message that could not be decoded, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub message: RawMessage,
    pub error: String,
}

/// A run of messages, decoded.
#[derive(Debug)]
pub struct Decoded {
    /// The good messages' rows, in offset order.
    pub batch: RecordBatch,
    pub dead: Vec<DeadLetter>,
    /// How long decoding took.
    pub took: Duration,
}

/// The provenance columns appended to every decoded row.
pub fn provenance_fields() -> [Field; 4] {
    [
        Field::new("_partition", DataType::Int32, false),
        Field::new("_offset", DataType::Int64, false),
        Field::new("_timestamp", DataType::Timestamp(TimeUnit::Millisecond, Some("+00:00".into())), true),
        Field::new("_key", DataType::Binary, true),
    ]
}

