//! JSON messages to Arrow rows, against the publisher's declared JSON Schema.
//!
//! Decoding is in bulk (arrow-json), validation per message: each message must
//! be exactly one JSON object that fits the schema. A message that is not goes
//! to the dead letters with the reason; it never fails the batch.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::json::reader::{Decoder, ReaderBuilder};

use super::{Body, Rows};

/// Decodes JSON values of one declared schema.
#[derive(Debug, Clone)]
pub struct JsonDecoder {
    declared: SchemaRef,
}

impl JsonDecoder {
    pub fn new(declared: SchemaRef) -> Self {
        Self { declared }
    }

    /// Decodes `bodies`, each one JSON value, into the declared columns.
    pub fn decode(&self, bodies: &[Body<'_>]) -> Rows {
        let mut failed = Vec::new();
        // First pass, per value: exactly one complete JSON document.
        let total = bodies.len();
        let mut good: Vec<usize> = Vec::with_capacity(total);
        let mut decoder = self.fresh(total);
        for (i, body) in bodies.iter().enumerate() {
            match feed(&mut decoder, body.bytes) {
                Ok(()) => good.push(i),
                Err(error) => {
                    failed.push((i, error));
                    // The decoder may hold part of the bad value: start over with the good ones.
                    decoder = self.fresh(total);
                    for &g in &good {
                        feed(&mut decoder, bodies[g].bytes)
                            .expect("a value that fed cleanly before feeds cleanly again");
                    }
                }
            }
        }
        // Second pass, in bulk: types and required fields. On failure, bisect to find the culprits.
        let mut batches = Vec::new();
        self.flush_or_bisect(decoder, bodies, &good, &mut batches, &mut failed);
        failed.sort_by_key(|(i, _)| *i);
        Rows { batches, failed }
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
        bodies: &[Body<'_>],
        chosen: &[usize],
        out: &mut Vec<RecordBatch>,
        failed: &mut Vec<(usize, String)>,
    ) {
        if chosen.is_empty() {
            return;
        }
        match decoder.flush() {
            Ok(Some(batch)) if batch.num_rows() == chosen.len() => out.push(batch),
            Ok(other) => panic!("decoded {} rows from {} values", other.map_or(0, |b| b.num_rows()), chosen.len()),
            Err(e) if chosen.len() == 1 => failed.push((chosen[0], explain(e))),
            Err(_) => {
                let (left, right) = chosen.split_at(chosen.len() / 2);
                for half in [left, right] {
                    let mut decoder = self.fresh(half.len());
                    for &i in half {
                        feed(&mut decoder, bodies[i].bytes).expect("fed cleanly before");
                    }
                    self.flush_or_bisect(decoder, bodies, half, out, failed);
                }
            }
        }
    }
}

/// Feeds one value, checking it is exactly one complete JSON document.
fn feed(decoder: &mut Decoder, value: &[u8]) -> Result<(), String> {
    let before = decoder.len();
    let consumed = decoder.decode(value).map_err(explain)?;
    decoder.decode(b"\n").map_err(explain)?;
    if consumed < value.len() || decoder.len() > before + 1 {
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
    use std::sync::Arc;

    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Int64Type;

    use super::*;

    fn decoder() -> JsonDecoder {
        JsonDecoder::new(Arc::new(
            super::super::json_schema::from_json_schema(r#"{"type":"object","required":["id"],"properties":{"id":{"type":"integer"},"name":{"type":"string"}}}"#).unwrap(),
        ))
    }

    fn decode(values: &[&str]) -> Rows {
        let bodies: Vec<Body<'_>> = values.iter().map(|v| Body::plain(v.as_bytes())).collect();
        decoder().decode(&bodies)
    }

    fn ids(rows: &Rows) -> Vec<i64> {
        rows.batches.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect()
    }

    #[test]
    fn good_values_decode_into_the_declared_columns() {
        let rows = decode(&[r#"{"id": 1, "name": "a"}"#, r#"{"id": 2}"#]);
        assert!(rows.failed.is_empty());
        assert_eq!(rows.batches.len(), 1, "without bad values, one batch");
        assert_eq!(ids(&rows), [1, 2]);
        assert!(rows.batches[0].column(1).is_null(1));
    }

    #[test]
    fn each_bad_value_fails_alone_and_the_rest_decode() {
        let rows = decode(&[
            r#"{"id": 1}"#,
            r#"{"id": "#,
            r#"{"id": 3}"#,
            r#"{"id": "three"}"#,
            r#"{"name": "no id"}"#,
            r#"{"id": 6}{"id": 7}"#,
            r#"[1, 2]"#,
            "   ",
            r#"{"id": 9}"#,
        ]);
        assert_eq!(ids(&rows), [1, 3, 9]);
        let failed: Vec<usize> = rows.failed.iter().map(|(i, _)| *i).collect();
        assert_eq!(failed, [1, 3, 4, 5, 6, 7]);
        assert_eq!(rows.failed[3].1, "the value holds more than one JSON document");
        assert_eq!(rows.failed[2].1, "required property `id` is missing or null");
        assert!(rows.failed[1].1.starts_with("not valid JSON for the schema: "), "{}", rows.failed[1].1);
    }

    #[test]
    fn values_after_an_incomplete_one_still_decode() {
        let mut values = vec![r#"{"id": 1"#.to_string()];
        values.extend((1..50).map(|i| format!(r#"{{"id": {i}}}"#)));
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        let rows = decode(&values);
        assert_eq!(rows.failed.len(), 1);
        assert_eq!(ids(&rows).len(), 49);
    }
}
