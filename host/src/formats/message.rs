//! A message as a source hands it to the decoders, and a message that did
//! not decode (a dead letter), with why.

/// One message, as read from its source (a Kafka record today).
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
