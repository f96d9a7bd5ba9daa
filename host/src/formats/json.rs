//! JSON messages to Arrow rows, against the publisher's declared JSON Schema.
//!
//! Decoding is in bulk (arrow-json), validation per message: each message must
//! be exactly one JSON object that fits the schema. A message that is not goes
//! to the dead letters with the reason; it never fails the batch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, BinaryArray, Int32Array, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::json::reader::{Decoder, ReaderBuilder};

use super::{DeadLetter, Decoded, RawMessage, provenance_fields};

/// Decodes JSON messages of one declared schema.
#[derive(Debug, Clone)]
pub struct JsonDecoder {
    declared: SchemaRef,
    output: SchemaRef,
}

impl JsonDecoder {
    pub fn new(declared: SchemaRef) -> Self {
        let mut fields: Vec<Field> = declared.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.extend(provenance_fields());
        Self { declared, output: Arc::new(Schema::new(fields)) }
    }

    /// The schema of decoded rows: the declared columns, then the provenance columns.
    pub fn output_schema(&self) -> &SchemaRef {
        &self.output
    }

    /// Decodes `messages` into one batch of the good ones, and dead letters for the rest.
    pub fn decode(&self, messages: Vec<RawMessage>) -> Decoded {
        let started = Instant::now();
        let mut dead = Vec::new();
        // First pass, per message: exactly one complete JSON value.
        let total = messages.len();
        let mut good: Vec<RawMessage> = Vec::with_capacity(total);
        let mut decoder = self.fresh(total);
        for message in messages {
            match feed(&mut decoder, &message) {
                Ok(()) => good.push(message),
                Err(error) => {
                    dead.push(DeadLetter { message, error });
                    // The decoder may hold part of the bad message: start over with the good ones.
                    decoder = self.fresh(total);
                    for m in &good {
                        feed(&mut decoder, m).expect("a message that fed cleanly before feeds cleanly again");
                    }
                }
            }
        }
        // Second pass, in bulk: types and required fields. On failure, bisect to find the culprits.
        let mut batches = Vec::new();
        self.flush_or_bisect(decoder, &good, &mut batches, &mut dead);
        dead.sort_by_key(|d| (d.message.partition, d.message.offset));
        // Without bad messages there is one batch: no need to copy it into another.
        let batch = match batches.len() {
            1 => batches.pop().expect("one batch"),
            _ => concat_batches(&self.output, &batches).expect("batches of one schema"),
        };
        Decoded { batch, dead, took: started.elapsed() }
    }

    fn fresh(&self, rows: usize) -> Decoder {
        ReaderBuilder::new(self.declared.clone())
            .with_batch_size(rows.max(1) + 1)
            .build_decoder()
            .expect("a decoder for a schema we built")
    }

    fn flush_or_bisect(
        &self,
        mut decoder: Decoder,
        messages: &[RawMessage],
        out: &mut Vec<RecordBatch>,
        dead: &mut Vec<DeadLetter>,
    ) {
        if messages.is_empty() {
            return;
        }
        match decoder.flush() {
            Ok(Some(batch)) if batch.num_rows() == messages.len() => out.push(self.with_provenance(batch, messages)),
            Ok(other) => panic!("decoded {} rows from {} messages", other.map_or(0, |b| b.num_rows()), messages.len()),
            Err(e) if messages.len() == 1 => dead.push(DeadLetter { message: messages[0].clone(), error: explain(e) }),
            Err(_) => {
                let (left, right) = messages.split_at(messages.len() / 2);
                for half in [left, right] {
                    let mut decoder = self.fresh(half.len());
                    for m in half {
                        feed(&mut decoder, m).expect("fed cleanly before");
                    }
                    self.flush_or_bisect(decoder, half, out, dead);
                }
            }
        }
    }

    fn with_provenance(&self, batch: RecordBatch, messages: &[RawMessage]) -> RecordBatch {
        let mut columns = batch.columns().to_vec();
        let extra: [ArrayRef; 4] = [
            Arc::new(Int32Array::from_iter_values(messages.iter().map(|m| m.partition))),
            Arc::new(Int64Array::from_iter_values(messages.iter().map(|m| m.offset))),
            Arc::new(
                TimestampMillisecondArray::from_iter(messages.iter().map(|m| m.timestamp)).with_timezone("+00:00"),
            ),
            Arc::new(BinaryArray::from_iter(messages.iter().map(|m| m.key()))),
        ];
        columns.extend(extra);
        RecordBatch::try_new(self.output.clone(), columns).expect("provenance columns match the output schema")
    }
}

/// Feeds one message, checking it is exactly one complete JSON value.
fn feed(decoder: &mut Decoder, message: &RawMessage) -> Result<(), String> {
    let payload = message.payload().ok_or("the message has no value (a tombstone)")?;
    let before = decoder.len();
    let consumed = decoder.decode(payload).map_err(explain)?;
    decoder.decode(b"\n").map_err(explain)?;
    if consumed < payload.len() || decoder.len() > before + 1 {
        return Err("the value holds more than one JSON document".into());
    }
    if decoder.has_partial_record() || decoder.len() == before {
        return Err("the value is not a complete JSON object".into());
    }
    Ok(())
}

fn explain(e: ArrowError) -> String {
    let message = match e {
        ArrowError::JsonError(m) => m,
        other => other.to_string(),
    };
    // arrow-json reports a missing required property as nulls in a non-nullable child.
    if message.contains("unmasked nulls in non-nullable")
        && let Some(field) = message.split("Field { \"").nth(1).and_then(|rest| rest.split('"').next())
    {
        return format!("required property `{field}` is missing or null");
    }
    format!("not valid JSON for the schema: {message}")
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Int64Type;

    use super::*;

    fn msg(offset: i64, payload: &str) -> RawMessage {
        RawMessage::new(2, offset, Some(1_700_000_000_000 + offset), Some(b"k"), Some(payload.as_bytes()), vec![])
    }

    fn decoder() -> JsonDecoder {
        JsonDecoder::new(Arc::new(
            super::super::json_schema::from_json_schema(r#"{"type":"object","required":["id"],"properties":{"id":{"type":"integer"},"name":{"type":"string"}}}"#).unwrap(),
        ))
    }

    #[test]
    fn key_and_value_share_one_allocation_and_keep_none_apart_from_empty() {
        let m = RawMessage::new(0, 1, None, Some(b"key"), Some(b"value"), vec![]);
        assert_eq!((m.key(), m.payload(), m.size()), (Some(b"key".as_slice()), Some(b"value".as_slice()), 8));
        let m = RawMessage::new(0, 1, None, None, Some(b""), vec![]);
        assert_eq!((m.key(), m.payload(), m.size()), (None, Some(b"".as_slice()), 0));
        let m = RawMessage::new(0, 1, None, Some(b""), None, vec![]);
        assert_eq!((m.key(), m.payload()), (Some(b"".as_slice()), None));
    }

    #[test]
    fn good_messages_decode_with_provenance() {
        let Decoded { batch, dead, .. } =
            decoder().decode(vec![msg(10, r#"{"id": 1, "name": "a"}"#), msg(11, r#"{"id": 2}"#)]);
        assert!(dead.is_empty());
        assert_eq!(batch.num_rows(), 2);
        let names: Vec<&str> = batch.schema_ref().fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["id", "name", "_partition", "_offset", "_timestamp", "_key"]);
        assert_eq!(batch.column(0).as_primitive::<Int64Type>().values(), &[1, 2]);
        assert_eq!(batch.column(3).as_primitive::<Int64Type>().values(), &[10, 11]);
        assert!(batch.column(1).is_null(1));
    }

    #[test]
    fn each_bad_message_becomes_a_dead_letter_and_the_rest_decode() {
        let messages = vec![
            msg(0, r#"{"id": 1}"#),
            msg(1, r#"{"id": "#),
            msg(2, r#"{"id": 3}"#),
            msg(3, r#"{"id": "three"}"#),
            msg(4, r#"{"name": "no id"}"#),
            msg(5, r#"{"id": 6}{"id": 7}"#),
            msg(6, r#"[1, 2]"#),
            msg(7, "   "),
            msg(8, r#"{"id": 9}"#),
        ];
        let tombstone = RawMessage::new(2, 9, None, Some(b"k"), None, vec![]);
        let mut all = messages;
        all.push(tombstone);
        let Decoded { batch, dead, .. } = decoder().decode(all);
        assert_eq!(batch.column(0).as_primitive::<Int64Type>().values(), &[1, 3, 9]);
        assert_eq!(batch.column(3).as_primitive::<Int64Type>().values(), &[0, 2, 8]);
        let dead_offsets: Vec<i64> = dead.iter().map(|d| d.message.offset).collect();
        assert_eq!(dead_offsets, [1, 3, 4, 5, 6, 7, 9]);
        for d in &dead {
            assert!(!d.error.is_empty());
        }
        assert_eq!(dead[6].error, "the message has no value (a tombstone)");
        assert_eq!(dead[3].error, "the value holds more than one JSON document");
        assert_eq!(dead[2].error, "required property `id` is missing or null");
        assert!(dead[1].error.starts_with("not valid JSON for the schema: "), "{}", dead[1].error);
    }

    #[test]
    fn messages_after_an_incomplete_one_still_decode() {
        let mut messages = vec![msg(0, r#"{"id": 1"#)];
        messages.extend((1..50).map(|i| msg(i, &format!(r#"{{"id": {i}}}"#))));
        let Decoded { batch, dead, .. } = decoder().decode(messages);
        assert_eq!(dead.len(), 1);
        assert_eq!(batch.num_rows(), 49);
    }

    #[test]
    fn nothing_in_nothing_out() {
        let Decoded { batch, dead, .. } = decoder().decode(vec![]);
        assert_eq!((batch.num_rows(), dead.len()), (0, 0));
    }
}
