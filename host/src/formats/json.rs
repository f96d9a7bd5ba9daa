//! JSON messages to Arrow rows, against the publisher's declared JSON Schema.
//!
//! Each message is parsed alone by simd-json (SIMD structural scan, UTF-8
//! checked, strings unescaped in place) into a tape, and the tape is walked
//! once into the columns, whose plan is made once from the declared schema.
//! A message must be exactly one JSON object that fits the schema; one that
//! is not goes to the dead letters with the reason and never fails the
//! batch: what it had appended is cut off again.
//!
//! How values fit the columns (as arrow-json, which weir used before, read them):
//! * `integer`: a JSON integer, or a number or string holding one (`1.0`,
//!   `"42"`); a fraction is refused rather than truncated.
//! * `number`: any JSON number, or a string holding one.
//! * `string`: a JSON string only. `date-time` and `date` strings are parsed as
//!   arrow-cast parses them (RFC 3339 and the usual variants; a date-time without
//!   an offset is UTC); a number is taken as microseconds, or days. The usual
//!   RFC 3339 shape is read by `super::rfc3339` to the same value, in half
//!   arrow-cast's time (8 date-times a message: 0.84 → 0.58 µs a message).
//! * `object`: an object; unknown properties are skipped, a repeated one's last
//!   value wins. `array`: an array.
//! * A required property (non-nullable column) that is missing or null
//!   refuses the message, naming the property's path.
//!
//! Measured with `cargo bench -p weir --bench json_decode` (CPU µs a message,
//! decoding alone): arrow-json's tape decoder, fed one message at a time as
//! weir must (to tell which message is bad), against this: the benchmark's
//! click events 0.72 → 0.57, 64 flat fields 4.37 → 2.68, nested objects and
//! arrays of objects 1.46 → 1.20. The same columns either way.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::timezone::Tz;
use arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Float64Array, Int64Array, ListArray, RecordBatch, StringArray, StructArray,
    TimestampMicrosecondArray,
};
use arrow::array::{BooleanBufferBuilder, NullBufferBuilder};
use arrow::buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{DataType, Date32Type, FieldRef, Fields, SchemaRef, TimeUnit};
use simd_json::{Buffers, Node, StaticNode, Tape};

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
        let mut row = Object::new(self.declared.fields(), bodies.len(), "");
        let mut failed = Vec::new();
        // simd-json reads each value with padding after it, and unescapes its strings in
        // place: one copy of the whole run, where each value's padding is the values after it.
        let mut run: Vec<u8> =
            Vec::with_capacity(bodies.iter().map(|b| b.bytes.len()).sum::<usize>() + simd_json::INPUT_PADDING);
        for body in bodies {
            run.extend_from_slice(&body.bytes);
        }
        run.resize(run.len() + simd_json::INPUT_PADDING, b' ');
        let mut buffers = Buffers::new(bodies.iter().map(|b| b.bytes.len()).max().unwrap_or(0));
        let mut tape: Tape<'static> = Tape::null();
        let mut start = 0;
        for (i, body) in bodies.iter().enumerate() {
            let len = body.bytes.len();
            let mut nodes = tape.reset();
            let parsed = simd_json::fill_tape_padded(&mut run[start..], len, &mut buffers, &mut nodes)
                .map_err(|e| syntax(&body.bytes, &e))
                .and_then(|()| match nodes.0.first() {
                    Some(Node::Object { .. }) => row.append(&nodes.0),
                    _ => Err("the value is not a JSON object".to_string()),
                });
            if let Err(reason) = parsed {
                row.truncate(i - failed.len());
                failed.push((i, reason));
            }
            tape = nodes.reset();
            start += len;
        }
        let rows = bodies.len() - failed.len();
        let columns = row.finish_columns();
        let batch = RecordBatch::try_new_with_options(
            self.declared.clone(),
            columns,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)),
        )
        .expect("columns built for the declared schema");
        Rows { batches: vec![batch], failed }
    }
}

/// Why `value` is not one JSON document. serde_json reads it again to say it
/// in words (simd-json's errors name a parser state); only bad values pay.
fn syntax(value: &[u8], e: &simd_json::Error) -> String {
    match serde_json::from_slice::<serde::de::IgnoredAny>(value) {
        Err(e) if e.to_string().starts_with("trailing characters") => {
            "the value holds more than one JSON document".into()
        }
        Err(e) if e.is_eof() => format!("the value is not a complete JSON document ({e})"),
        Err(e) => format!("not valid JSON: {e}"),
        Ok(_) => format!("not valid JSON: {e}"),
    }
}

/// How many tape nodes the value at `nodes[0]` spans.
fn span(nodes: &[Node<'_>]) -> usize {
    match nodes[0] {
        Node::Object { count, .. } | Node::Array { count, .. } => count + 1,
        _ => 1,
    }
}

/// A value's JSON type, for messages.
fn kind(node: &Node<'_>) -> String {
    match node {
        Node::String(s) if s.len() <= 40 => format!("the string {s:?}"),
        Node::String(_) => "a string".into(),
        Node::Object { .. } => "an object".into(),
        Node::Array { .. } => "an array".into(),
        Node::Static(StaticNode::Bool(b)) => b.to_string(),
        Node::Static(StaticNode::Null) => "null".into(),
        Node::Static(StaticNode::F64(f)) => f.to_string(),
        Node::Static(StaticNode::I64(n)) => n.to_string(),
        Node::Static(StaticNode::U64(n)) => n.to_string(),
    }
}

fn mismatch(path: &str, expected: &str, node: &Node<'_>) -> String {
    format!("not valid JSON for the schema: property `{path}` must be {expected}, not {}", kind(node))
}

/// An integer from a JSON number or a string holding one; fractions are refused.
fn integer(node: &Node<'_>) -> Option<i64> {
    let whole = |f: f64| (f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64).then_some(f as i64);
    match *node {
        Node::Static(StaticNode::I64(n)) => Some(n),
        Node::Static(StaticNode::U64(n)) => i64::try_from(n).ok(),
        Node::Static(StaticNode::F64(f)) => whole(f),
        Node::String(s) => s.trim().parse::<i64>().ok().or_else(|| whole(s.trim().parse::<f64>().ok()?)),
        _ => None,
    }
}

fn number(node: &Node<'_>) -> Option<f64> {
    match *node {
        Node::Static(StaticNode::I64(n)) => Some(n as f64),
        Node::Static(StaticNode::U64(n)) => Some(n as f64),
        Node::Static(StaticNode::F64(f)) => Some(f),
        Node::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
}

/// One column as it is appended: which rows are null, and the values. Every
/// kind can be cut back to a number of rows, so a message that fails half-way
/// leaves nothing behind.
struct Column {
    nulls: NullBufferBuilder,
    values: Values,
}

enum Values {
    Int64(Vec<i64>),
    Float64(Vec<f64>),
    Boolean(BooleanBufferBuilder),
    Utf8 { offsets: Vec<i32>, data: Vec<u8> },
    Timestamp(Vec<i64>, Arc<str>, Tz),
    Date32(Vec<i32>),
    Struct(Box<Object>),
    List { item: FieldRef, offsets: Vec<i32>, items: Box<Column>, items_path: Box<str> },
}

impl Column {
    /// A column of `data_type`; `path` is its property's (for nested properties' messages).
    fn new(data_type: &DataType, capacity: usize, path: &str) -> Self {
        let values = match data_type {
            DataType::Int64 => Values::Int64(Vec::with_capacity(capacity)),
            DataType::Float64 => Values::Float64(Vec::with_capacity(capacity)),
            DataType::Boolean => Values::Boolean(BooleanBufferBuilder::new(capacity)),
            DataType::Utf8 => {
                let mut offsets = Vec::with_capacity(capacity + 1);
                offsets.push(0);
                Values::Utf8 { offsets, data: Vec::with_capacity(capacity * 16) }
            }
            DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) => {
                let parsed = tz.parse().expect("JSON Schema maps date-time to a fixed offset");
                Values::Timestamp(Vec::with_capacity(capacity), tz.clone(), parsed)
            }
            DataType::Date32 => Values::Date32(Vec::with_capacity(capacity)),
            DataType::Struct(fields) => Values::Struct(Box::new(Object::new(fields, capacity, path))),
            DataType::List(item) => {
                let mut offsets = Vec::with_capacity(capacity + 1);
                offsets.push(0);
                let items_path: Box<str> = format!("{path}[]").into();
                let items = Box::new(Self::new(item.data_type(), capacity, &items_path));
                Values::List { item: item.clone(), offsets, items, items_path }
            }
            other => unreachable!("JSON Schema maps to no {other} column"),
        };
        Self { nulls: NullBufferBuilder::new(capacity), values }
    }

    fn append_null(&mut self) {
        match &mut self.values {
            Values::Int64(v) | Values::Timestamp(v, ..) => v.push(0),
            Values::Float64(v) => v.push(0.0),
            Values::Date32(v) => v.push(0),
            Values::Boolean(v) => v.append(false),
            Values::Utf8 { offsets, data } => offsets.push(data.len() as i32),
            Values::Struct(object) => object.append_nulls(),
            Values::List { offsets, .. } => offsets.push(*offsets.last().expect("starts at 0")),
        }
        self.nulls.append_null();
    }

    /// Appends the value at `nodes[0]` (not null), or says why it does not fit.
    fn append(&mut self, nodes: &[Node<'_>], path: &str) -> Result<(), String> {
        let node = &nodes[0];
        match &mut self.values {
            Values::Int64(v) => v.push(integer(node).ok_or_else(|| mismatch(path, "an integer", node))?),
            Values::Float64(v) => v.push(number(node).ok_or_else(|| mismatch(path, "a number", node))?),
            Values::Boolean(v) => match node {
                Node::Static(StaticNode::Bool(b)) => v.append(*b),
                _ => return Err(mismatch(path, "true or false", node)),
            },
            Values::Utf8 { offsets, data } => match node {
                Node::String(s) => {
                    data.extend_from_slice(s.as_bytes());
                    let end =
                        i32::try_from(data.len()).map_err(|_| format!("property `{path}`: over 2 GiB of text"))?;
                    offsets.push(end);
                }
                _ => return Err(mismatch(path, "a string", node)),
            },
            Values::Timestamp(v, _, tz) => v.push(match node {
                Node::String(s) => match super::rfc3339::micros(s.as_bytes()) {
                    Some(micros) => micros,
                    None => arrow::compute::kernels::cast_utils::string_to_datetime(tz, s)
                        .map_err(|_| mismatch(path, "a date-time (RFC 3339)", node))?
                        .timestamp_micros(),
                },
                _ => integer(node).ok_or_else(|| mismatch(path, "a date-time string or microseconds", node))?,
            }),
            Values::Date32(v) => v.push(match node {
                Node::String(s) => <Date32Type as arrow::compute::kernels::cast_utils::Parser>::parse(s)
                    .ok_or_else(|| mismatch(path, "a date (YYYY-MM-DD)", node))?,
                _ => integer(node)
                    .and_then(|d| i32::try_from(d).ok())
                    .ok_or_else(|| mismatch(path, "a date string or days", node))?,
            }),
            Values::Struct(object) => match node {
                Node::Object { .. } => object.append(nodes)?,
                _ => return Err(mismatch(path, "an object", node)),
            },
            Values::List { items, offsets, items_path, .. } => {
                let Node::Array { len, .. } = *node else { return Err(mismatch(path, "an array", node)) };
                let mut at = 1;
                for _ in 0..len {
                    match nodes[at] {
                        Node::Static(StaticNode::Null) => items.append_null(),
                        _ => items.append(&nodes[at..], items_path)?,
                    }
                    at += span(&nodes[at..]);
                }
                let end =
                    i32::try_from(items.nulls.len()).map_err(|_| format!("property `{path}`: over 2^31 items"))?;
                offsets.push(end);
            }
        }
        self.nulls.append_non_null();
        Ok(())
    }

    fn truncate(&mut self, rows: usize) {
        match &mut self.values {
            Values::Int64(v) | Values::Timestamp(v, ..) => v.truncate(rows),
            Values::Float64(v) => v.truncate(rows),
            Values::Date32(v) => v.truncate(rows),
            Values::Boolean(v) => v.truncate(rows),
            Values::Utf8 { offsets, data } => {
                offsets.truncate(rows + 1);
                data.truncate(offsets[rows] as usize);
            }
            Values::Struct(object) => object.truncate(rows),
            Values::List { offsets, items, .. } => {
                offsets.truncate(rows + 1);
                items.truncate(offsets[rows] as usize);
            }
        }
        self.nulls.truncate(rows);
    }

    /// The column's array. Its buffers are cut to their length: a run's arrays are
    /// held until the batch closes, and the room a growing `Vec` keeps (up to as
    /// much again) cost about 30 MB of peak RSS at a 64 MB rollover.
    fn finish(&mut self) -> ArrayRef {
        fn exact<T>(v: &mut Vec<T>) -> Vec<T> {
            let mut v = std::mem::take(v);
            v.shrink_to_fit();
            v
        }
        let nulls = self.nulls.finish();
        match &mut self.values {
            Values::Int64(v) => Arc::new(Int64Array::new(exact(v).into(), nulls)),
            Values::Float64(v) => Arc::new(Float64Array::new(exact(v).into(), nulls)),
            Values::Boolean(v) => Arc::new(BooleanArray::new(v.finish(), nulls)),
            Values::Utf8 { offsets, data } => {
                let offsets = OffsetBuffer::new(ScalarBuffer::from(exact(offsets)));
                let data = Buffer::from_vec(exact(data));
                // SAFETY: the offsets rise from 0 to the data's length, each at the end of a `&str`.
                Arc::new(unsafe { StringArray::new_unchecked(offsets, data, nulls) })
            }
            Values::Timestamp(v, tz, _) => {
                Arc::new(TimestampMicrosecondArray::new(exact(v).into(), nulls).with_timezone(tz.clone()))
            }
            Values::Date32(v) => Arc::new(Date32Array::new(exact(v).into(), nulls)),
            Values::Struct(object) => {
                let columns = object.finish_columns();
                Arc::new(StructArray::new(object.fields.clone(), columns, nulls))
            }
            Values::List { item, offsets, items, .. } => {
                let offsets = OffsetBuffer::new(ScalarBuffer::from(exact(offsets)));
                Arc::new(ListArray::new(item.clone(), offsets, items.finish(), nulls))
            }
        }
    }
}

/// The columns of an object's properties (the message itself, or a nested `object`).
struct Object {
    fields: Fields,
    columns: Vec<Column>,
    /// Property name → column, for properties out of the declared order.
    index: HashMap<Box<str>, usize>,
    /// The properties' paths from the message (`geo.lat`), for messages.
    paths: Vec<String>,
    /// Where each property's value lies in the tape while one object is read.
    found: Vec<Option<usize>>,
}

impl Object {
    /// The columns of `fields`, the properties of the object at `path` ("" for the message).
    fn new(fields: &Fields, capacity: usize, path: &str) -> Self {
        let paths: Vec<String> = fields
            .iter()
            .map(|f| if path.is_empty() { f.name().clone() } else { format!("{path}.{}", f.name()) })
            .collect();
        Self {
            fields: fields.clone(),
            columns: fields.iter().zip(&paths).map(|(f, p)| Column::new(f.data_type(), capacity, p)).collect(),
            index: fields.iter().enumerate().map(|(i, f)| (f.name().as_str().into(), i)).collect(),
            paths,
            found: vec![None; fields.len()],
        }
    }

    /// Appends the object at `nodes[0]`.
    fn append(&mut self, nodes: &[Node<'_>]) -> Result<(), String> {
        let Node::Object { len, .. } = nodes[0] else { unreachable!("checked by the caller") };
        self.found.iter_mut().for_each(|f| *f = None);
        let (mut at, mut next) = (1, 0);
        for _ in 0..len {
            let Node::String(key) = nodes[at] else { unreachable!("an object's keys are strings") };
            // Properties usually come in one order, message after message: try the one
            // after the last found before looking the name up.
            let column = match self.fields.get(next) {
                Some(f) if f.name() == key => Some(next),
                _ => self.find(key),
            };
            if let Some(c) = column {
                self.found[c] = Some(at + 1);
                next = c + 1;
            }
            at += 1 + span(&nodes[at + 1..]);
        }
        for (c, column) in self.columns.iter_mut().enumerate() {
            let value =
                self.found[c].map(|at| &nodes[at..]).filter(|v| !matches!(v[0], Node::Static(StaticNode::Null)));
            match value {
                Some(value) => column.append(value, &self.paths[c])?,
                None if self.fields[c].is_nullable() => column.append_null(),
                None => return Err(format!("required property `{}` is missing or null", self.paths[c])),
            }
        }
        Ok(())
    }

    /// The column of property `key`.
    fn find(&self, key: &str) -> Option<usize> {
        if self.fields.len() <= 16 {
            self.fields.iter().position(|f| f.name() == key)
        } else {
            self.index.get(key).copied()
        }
    }

    /// A null object: each property null (masked by the object's own null).
    fn append_nulls(&mut self) {
        for column in &mut self.columns {
            column.append_null();
        }
    }

    fn truncate(&mut self, rows: usize) {
        for column in &mut self.columns {
            column.truncate(rows);
        }
    }

    fn finish_columns(&mut self) -> Vec<ArrayRef> {
        self.columns.iter_mut().map(Column::finish).collect()
    }
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
    fn a_value_is_read_to_its_own_end_and_no_further() {
        // The values lie back to back in one buffer: the rest of a cut-off value must not
        // be taken from the one after it.
        let rows = decode(&[r#"{"id": "#, r#"2}"#, r#"{"id": 3, "name": "ab"#, r#"c"}"#, r#"{"id": 5}"#]);
        assert_eq!(ids(&rows), [5]);
        assert_eq!(rows.failed.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [0, 1, 2, 3]);
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

    fn every_type() -> SchemaRef {
        Arc::new(super::super::json_schema::from_json_schema(super::super::json_schema::tests::EVERY_TYPE).unwrap())
    }

    /// What arrow-json's reader makes of the same values.
    fn arrow_json(schema: &SchemaRef, values: &[&str]) -> RecordBatch {
        let mut decoder = arrow::json::ReaderBuilder::new(schema.clone()).build_decoder().unwrap();
        decoder.decode(values.join("\n").as_bytes()).unwrap();
        decoder.flush().unwrap().unwrap()
    }

    #[test]
    fn reads_every_type_as_arrow_json_does() {
        let values = [
            r#"{"id": 1, "score": 2.5, "ts": "2026-11-29T10:00:00Z", "day": "2026-11-29", "ok": true, "ref": "a",
                "tags": ["x", "y"], "geo": {"lat": 1.5, "lon": -2}, "hops": [{"at": 1, "via": [1, 2]}, {"at": 2}]}"#,
            // Out of order, unknown properties (nested ones too), escapes, nulls.
            r#"{"hops": null, "unknown": {"deep": [1, {"x": "y"}]}, "ts": "2026-11-29T10:00:00.123456+02:00",
                "id": 2, "ref": "caf\u00e9 \"q\"\n", "geo": null, "tags": [null, "z"], "ok": false, "score": null}"#,
            // Numbers as strings, integers as numbers, a date-time without an offset, microseconds.
            r#"{"id": "3", "score": "4.25", "ts": "2026-11-29 10:00:00", "day": 20000, "tags": [], "hops": [{"via": []}, {}]}"#,
            r#"{"id": 4, "score": 7, "ts": 1764410400000000, "tags": ["t"], "geo": {"lat": 0}, "id": 5}"#,
            r#"{"id": 1e3, "ts": "2026-01-01T00:00:00.5Z", "tags": [], "geo": {"lat": 3, "lat": 4}}"#,
        ];
        let schema = every_type();
        let bodies: Vec<Body<'_>> = values.iter().map(|v| Body::plain(v.as_bytes())).collect();
        let rows = JsonDecoder::new(schema.clone()).decode(&bodies);
        assert!(rows.failed.is_empty(), "{:?}", rows.failed);
        assert_eq!(rows.batches, [arrow_json(&schema, &values)]);
    }

    #[test]
    fn a_value_failing_half_way_leaves_nothing_behind() {
        let schema = every_type();
        let values = [
            r#"{"id": 1, "ts": 0, "tags": ["a"], "hops": [{"at": 1, "via": [1]}]}"#,
            // Fails in the last property, after every other column (and nested lists) took a value.
            r#"{"id": 2, "ts": 0, "tags": ["b", "c"], "geo": {"lat": 1}, "hops": [{"at": 2, "via": [2, 3]}, {"via": ["x"]}]}"#,
            r#"{"id": 3, "ts": 0, "tags": ["d"], "geo": {"lon": 1}}"#,
            r#"{"id": 4, "ts": 0, "tags": ["e"], "hops": [{"at": 4, "via": [4]}]}"#,
        ];
        let bodies: Vec<Body<'_>> = values.iter().map(|v| Body::plain(v.as_bytes())).collect();
        let rows = JsonDecoder::new(schema.clone()).decode(&bodies);
        let reasons: Vec<(usize, &str)> = rows.failed.iter().map(|(i, r)| (*i, r.as_str())).collect();
        assert_eq!(
            reasons,
            [
                (1, "not valid JSON for the schema: property `hops[].via[]` must be an integer, not the string \"x\""),
                (2, "required property `geo.lat` is missing or null"),
            ]
        );
        assert_eq!(rows.batches, [arrow_json(&schema, &[values[0], values[3]])]);
    }

    #[test]
    fn an_integer_property_refuses_fractions_and_other_types() {
        let rows = decode(&[
            r#"{"id": 1.5}"#,
            r#"{"id": "1.5"}"#,
            r#"{"id": true}"#,
            r#"{"id": 9223372036854775808}"#,
            r#"{"id": "7"}"#,
        ]);
        assert_eq!(ids(&rows), [7]);
        assert_eq!(rows.failed[0].1, "not valid JSON for the schema: property `id` must be an integer, not 1.5");
        assert_eq!(rows.failed.len(), 4);
        let rows = decode(&[r#"{"id": 1, "name": 5}"#]);
        assert_eq!(rows.failed[0].1, "not valid JSON for the schema: property `name` must be a string, not 5");
    }

    #[test]
    fn syntax_errors_say_what_is_wrong_in_words() {
        let mut rows = decode(&[r#"{"id": 1,}"#, r#"{"id": "#, "\"text\""]);
        rows.failed.extend(decoder().decode(&[Body::plain(b"{\"id\": 1, \"name\": \"\xff\"}")]).failed);
        let reasons: Vec<&str> = rows.failed.iter().map(|(_, r)| r.as_str()).collect();
        assert_eq!(reasons[0], "not valid JSON: key must be a string at line 1 column 10");
        assert!(reasons[1].starts_with("the value is not a complete JSON document (EOF"), "{}", reasons[1]);
        assert_eq!(reasons[2], "the value is not a JSON object");
        assert!(reasons[3].starts_with("not valid JSON: "), "{}", reasons[3]);
    }
}
