//! The one interface the stream worker decodes through: [`Decoder`] turns a
//! run of one partition's messages into rows of the declared columns and
//! the provenance columns, and dead letters for the messages that do not
//! decode, whichever format and framing they use.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{
    ArrayRef, BinaryArray, BinaryBuilder, Int32Array, Int64Array, ListArray, RecordBatch, StringArray, StringBuilder,
    StructArray, TimestampMicrosecondArray, UInt32Array,
};
use arrow::buffer::OffsetBuffer;
use arrow::compute::{concat_batches, take};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

use super::writers::{Writer, WriterSchemas};
use super::{Body, DataFormat, DeadLetter, Format, RawMessage, Rows, avro, json, protobuf, registry};

/// A writer schema as one run uses it. The Avro text is the run's own copy:
/// cloning the shared one for every message would bounce its reference
/// count between the threads decoding other partitions' runs.
/// Likewise a Protobuf writer's check of a message-index path is asked of
/// the shared writer (behind a lock) only when the path changes.
struct RunWriter {
    id: registry::SchemaId,
    writer: Arc<Writer>,
    avro: Option<Arc<str>>,
    /// Protobuf: the path last checked, and what was found.
    checked: Option<(Vec<i32>, Result<(), String>)>,
}

impl RunWriter {
    fn new(id: registry::SchemaId, writer: Arc<Writer>) -> Self {
        let avro = match &*writer {
            Writer::Avro(text) => Some(Arc::from(&**text)),
            _ => None,
        };
        Self { id, writer, avro, checked: None }
    }

    /// Whether a Protobuf writer's message at `indexes` reads as the declared
    /// message (any other writer: yes).
    fn check(&mut self, indexes: &[i32]) -> Result<(), String> {
        let Writer::Protobuf(file) = &*self.writer else { return Ok(()) };
        match &self.checked {
            Some((last, found)) if last == indexes => found.clone(),
            _ => self.checked.insert((indexes.to_vec(), file.check(indexes))).1.clone(),
        }
    }
}

/// Turns a run of one partition's messages into rows and dead letters, for
/// any format, plain or registry-framed: the value's columns, then the
/// provenance columns with the key and (unless left out) the headers. Cheap
/// to clone; clones share the registry's writer schemas.
#[derive(Debug, Clone)]
pub struct Decoder {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    value: Part,
    key: Key,
    headers: bool,
    output: SchemaRef,
}

/// Values of one declared format, plain or registry-framed: a message's
/// value, or its key.
#[derive(Debug)]
pub struct Part {
    format: Format,
    json: Option<json::JsonDecoder>,
    writers: Option<WriterSchemas>,
}

/// What becomes of a message's key, the `_key` column.
#[derive(Debug)]
pub enum Key {
    /// The bytes as they are (`Binary`).
    Bytes,
    /// UTF-8 text (`Utf8`); a key that is not is a dead letter.
    String,
    /// Decoded with its own declared format, a record becoming a struct.
    Decoded(Part),
}

/// A part's values, decoded.
struct PartRows {
    /// The rows of the inputs that decoded, in order.
    batch: RecordBatch,
    /// Which message each row is.
    messages: Vec<usize>,
    /// Registry mode: the writer schema of each row.
    ids: Vec<registry::SchemaId>,
    failed: Vec<(usize, String)>,
}

impl Part {
    /// Values of `format`; with `writers`, registry-framed.
    pub fn new(format: Format, writers: Option<WriterSchemas>) -> Self {
        let json = match &format {
            Format::Json { columns, .. } => Some(json::JsonDecoder::new(columns.clone())),
            _ => None,
        };
        Self { format, json, writers }
    }

    /// Waits (without holding a thread) until every writer schema `bytes` name is known.
    async fn prepare<'m>(&self, bytes: impl Iterator<Item = &'m [u8]>) {
        if let Some(writers) = &self.writers {
            writers.prepare(bytes.filter_map(|b| writers.schema_id(b))).await;
        }
    }

    /// Decodes each `(message, bytes)` of `inputs`.
    fn decode<'m>(&self, inputs: impl Iterator<Item = (usize, &'m [u8])>) -> PartRows {
        let (mut bodies, mut of_body, mut ids, mut failed) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut last = None;
        for (i, bytes) in inputs {
            match self.body(bytes, &mut last) {
                Ok((body, id)) => {
                    bodies.push(body);
                    of_body.push(i);
                    if let Some(id) = id {
                        ids.push(id);
                    }
                }
                Err(reason) => failed.push((i, reason)),
            }
        }
        let rows = match &self.format {
            Format::Json { .. } => self.json.as_ref().expect("json decoder").decode(&bodies),
            Format::Avro(declared) => avro::decode(declared, &bodies),
            Format::Protobuf(declared) => protobuf_rows(declared, &bodies),
        };
        drop(bodies);
        let mut messages: Vec<usize> = Vec::with_capacity(of_body.len());
        let mut good_ids = Vec::with_capacity(ids.len());
        let mut bad = rows.failed.into_iter().peekable();
        for (b, &m) in of_body.iter().enumerate() {
            if bad.peek().is_some_and(|(i, _)| *i == b) {
                let (_, reason) = bad.next().expect("peeked");
                failed.push((m, reason));
            } else {
                messages.push(m);
                if let Some(id) = ids.get(b) {
                    good_ids.push(*id);
                }
            }
        }
        let columns = self.format.columns();
        let batch = match rows.batches.len() {
            0 => RecordBatch::new_empty(columns.clone()),
            1 => rows.batches.into_iter().next().expect("one batch"),
            _ => concat_batches(columns, &rows.batches).expect("batches of the declared columns"),
        };
        PartRows { batch, messages, ids: good_ids, failed }
    }

    /// A value without its framing, or why it cannot be decoded. `last` is
    /// the writer schema the run's previous framed value named: a run's
    /// values mostly share one, which is then looked up once.
    fn body<'m>(
        &self,
        bytes: &'m [u8],
        last: &mut Option<RunWriter>,
    ) -> Result<(Body<'m>, Option<registry::SchemaId>), String> {
        let Some(writers) = &self.writers else { return Ok((Body::plain(bytes), None)) };
        let protobuf = self.format.data_format() == DataFormat::Protobuf;
        let framed = registry::unframe(writers.kind(), bytes, protobuf)?;
        let run_writer = match last {
            Some(w) if w.id == framed.schema_id => w,
            _ => match writers.get(framed.schema_id) {
                Some(writer) => last.insert(RunWriter::new(framed.schema_id, writer)),
                None => return Err(format!("{} was never fetched from the registry", framed.schema_id)),
            },
        };
        let avro = match &*run_writer.writer {
            Writer::Refused(reason) => return Err(reason.clone()),
            Writer::Avro(_) => run_writer.avro.clone(),
            Writer::Json | Writer::Protobuf(_) => None,
        };
        run_writer.check(&framed.message_indexes)?;
        Ok((Body { bytes: framed.body, writer: avro }, Some(framed.schema_id)))
    }
}

/// The `_schema_id` column: Confluent's ids as numbers, Glue's UUIDs as text.
fn schema_id_column(kind: registry::RegistryKind, ids: &[registry::SchemaId]) -> ArrayRef {
    match kind {
        registry::RegistryKind::Glue => Arc::new(StringArray::from_iter_values(ids.iter().map(|id| match id {
            registry::SchemaId::Glue(uuid) => registry::uuid_text(*uuid),
            registry::SchemaId::Confluent(id) => id.to_string(),
        }))),
        registry::RegistryKind::Confluent => Arc::new(Int32Array::from_iter_values(ids.iter().map(|id| match id {
            registry::SchemaId::Confluent(id) => *id as i32,
            registry::SchemaId::Glue(_) => unreachable!("one registry a decoder"),
        }))),
    }
}

impl Key {
    fn data_type(&self) -> DataType {
        match self {
            Key::Bytes => DataType::Binary,
            Key::String => DataType::Utf8,
            Key::Decoded(part) => DataType::Struct(part.format.columns().fields().clone()),
        }
    }
}

impl Decoder {
    /// A decoder of messages whose values are `value`, keys `key`, headers
    /// kept as the `_headers` column when `headers`.
    pub fn new(value: Part, key: Key, headers: bool) -> Self {
        let mut fields: Vec<Field> = value.format.columns().fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.extend(provenance_fields(&key));
        match value.writers.as_ref().map(WriterSchemas::kind) {
            // A Confluent schema id; a Glue schema version's UUID.
            Some(registry::RegistryKind::Confluent) => fields.push(Field::new("_schema_id", DataType::Int32, false)),
            Some(registry::RegistryKind::Glue) => fields.push(Field::new("_schema_id", DataType::Utf8, false)),
            None => {}
        }
        if headers {
            fields.push(headers_field());
        }
        Self { inner: Arc::new(Inner { value, key, headers, output: Arc::new(Schema::new(fields)) }) }
    }

    /// Plain values of `format`, keys as bytes, headers kept: the defaults.
    pub fn plain(format: Format) -> Self {
        Self::new(Part::new(format, None), Key::Bytes, true)
    }

    /// The schema of decoded rows: the declared columns, then the provenance columns.
    pub fn output_schema(&self) -> &SchemaRef {
        &self.inner.output
    }

    /// Decodes a run on the blocking pool; in registry mode it first waits
    /// (without holding a thread) until every writer schema the run names is
    /// known, through registry outages.
    pub fn spawn(&self, messages: Vec<RawMessage>) -> DecodeTask {
        let decoder = self.clone();
        let framed_key = matches!(&self.inner.key, Key::Decoded(Part { writers: Some(_), .. }));
        DecodeTask(if self.inner.value.writers.is_none() && !framed_key {
            tokio::task::spawn_blocking(move || decoder.decode(messages))
        } else {
            tokio::spawn(async move {
                let inner = &decoder.inner;
                inner.value.prepare(messages.iter().filter_map(RawMessage::payload)).await;
                if let Key::Decoded(key) = &inner.key {
                    key.prepare(messages.iter().filter_map(RawMessage::key)).await;
                }
                tokio::task::spawn_blocking(move || decoder.decode(messages)).await.expect("decoding does not panic")
            })
        })
    }

    /// Decodes `messages` into one batch of the good ones, and dead letters
    /// for the rest. A message's key is read first: one whose key does not
    /// decode is a dead letter, its value not read.
    pub fn decode(&self, messages: Vec<RawMessage>) -> Decoded {
        let started = Instant::now();
        let inner = &*self.inner;
        let mut failed: Vec<(usize, String)> = Vec::new();
        let keys = match &inner.key {
            Key::Bytes => None,
            Key::String => {
                for (i, message) in messages.iter().enumerate() {
                    if message.key().is_some_and(|k| std::str::from_utf8(k).is_err()) {
                        failed.push((
                            i,
                            "the key is not UTF-8 text (the source declares key_format = \"string\")".into(),
                        ));
                    }
                }
                None
            }
            Key::Decoded(part) => {
                let mut keys = part.decode(messages.iter().enumerate().filter_map(|(i, m)| Some((i, m.key()?))));
                failed.extend(keys.failed.drain(..).map(|(i, reason)| (i, format!("the key: {reason}"))));
                Some(keys)
            }
        };
        failed.sort_by_key(|(i, _)| *i);
        let key_failed: Vec<usize> = failed.iter().map(|(i, _)| *i).collect();
        let mut values = Vec::with_capacity(messages.len());
        let mut skip = key_failed.iter().peekable();
        for (i, message) in messages.iter().enumerate() {
            if skip.next_if_eq(&&i).is_some() {
                continue;
            }
            match message.payload() {
                Some(value) => values.push((i, value)),
                None => failed.push((i, "the message has no value (a tombstone)".into())),
            }
        }
        let mut rows = inner.value.decode(values.into_iter());
        failed.append(&mut rows.failed);
        let batch = self.with_provenance(rows, keys, &messages);
        failed.sort_by_key(|(i, _)| *i);
        let mut dead = Vec::with_capacity(failed.len());
        let mut failed = failed.into_iter().peekable();
        for (i, message) in messages.into_iter().enumerate() {
            if failed.peek().is_some_and(|(f, _)| *f == i) {
                let (_, error) = failed.next().expect("peeked");
                dead.push(DeadLetter { message, error });
            }
        }
        Decoded { batch, dead, took: started.elapsed() }
    }

    /// The values' rows with the provenance columns of their messages.
    fn with_provenance(&self, rows: PartRows, keys: Option<PartRows>, messages: &[RawMessage]) -> RecordBatch {
        let good = || rows.messages.iter().map(|&i| &messages[i]);
        let mut columns = rows.batch.columns().to_vec();
        let key: ArrayRef = match (&self.inner.key, keys) {
            (Key::Decoded(_), Some(keys)) => {
                // Each good message's key row; a message without a key has a null one.
                let mut row_of: Vec<Option<u32>> = vec![None; messages.len()];
                for (row, &i) in keys.messages.iter().enumerate() {
                    row_of[i] = Some(row as u32);
                }
                let indices = UInt32Array::from_iter(rows.messages.iter().map(|&i| row_of[i]));
                let keys = StructArray::from(keys.batch);
                take(&keys, &indices, None).expect("indices of decoded keys")
            }
            (Key::String, _) => {
                Arc::new(StringArray::from_iter(good().map(|m| m.key().and_then(|k| std::str::from_utf8(k).ok()))))
            }
            _ => Arc::new(BinaryArray::from_iter(good().map(RawMessage::key))),
        };
        let extra: [ArrayRef; 4] = [
            Arc::new(Int32Array::from_iter_values(good().map(|m| m.partition))),
            Arc::new(Int64Array::from_iter_values(good().map(|m| m.offset))),
            Arc::new(
                TimestampMicrosecondArray::from_iter(good().map(|m| m.timestamp.map(|ms| ms * 1000)))
                    .with_timezone("+00:00"),
            ),
            key,
        ];
        columns.extend(extra);
        if let Some(writers) = &self.inner.value.writers {
            columns.push(schema_id_column(writers.kind(), &rows.ids));
        }
        if self.inner.headers {
            columns.push(headers_column(good()));
        }
        RecordBatch::try_new(self.inner.output.clone(), columns).expect("provenance columns match the output schema")
    }
}

/// The `_headers` column: each message's headers in order, repeated keys kept.
fn headers_field() -> Field {
    Field::new("_headers", DataType::List(Arc::new(Field::new_list_field(header_struct(), false))), false)
}

fn header_struct() -> DataType {
    DataType::Struct(vec![Field::new("key", DataType::Utf8, false), Field::new("value", DataType::Binary, true)].into())
}

fn headers_column<'m>(messages: impl Iterator<Item = &'m RawMessage> + Clone) -> ArrayRef {
    let count = messages.clone().map(|m| m.headers.len()).sum();
    let mut offsets = Vec::with_capacity(messages.size_hint().0 + 1);
    offsets.push(0i32);
    let (mut keys, mut values) = (StringBuilder::with_capacity(count, count * 8), BinaryBuilder::new());
    for message in messages {
        for (key, value) in &message.headers {
            keys.append_value(key);
            values.append_option(value.as_deref());
        }
        offsets.push(offsets.last().copied().unwrap_or(0) + message.headers.len() as i32);
    }
    let DataType::Struct(fields) = header_struct() else { unreachable!("a struct") };
    let entries = StructArray::new(fields, vec![Arc::new(keys.finish()), Arc::new(values.finish())], None);
    Arc::new(ListArray::new(
        Arc::new(Field::new_list_field(header_struct(), false)),
        OffsetBuffer::new(offsets.into()),
        Arc::new(entries),
        None,
    ))
}

/// A run being decoded. Dropping it stops the decoding: a run that waits for
/// the registry stops waiting once nobody wants its rows (a revoked
/// partition, a worker gone).
#[derive(Debug)]
pub struct DecodeTask(tokio::task::JoinHandle<Decoded>);

impl std::future::Future for DecodeTask {
    type Output = Decoded;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Decoded> {
        std::pin::Pin::new(&mut self.0).poll(cx).map(|done| done.expect("decoding does not panic"))
    }
}

impl Drop for DecodeTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Protobuf values are read with the declared message's plan: the wire format
/// is read by field number, whichever compatible version wrote it. A value
/// that fails part-way may have left part of itself in the columns, so the
/// values since the last failure are read again into fresh ones.
fn protobuf_rows(declared: &protobuf::Declared, bodies: &[Body<'_>]) -> Rows {
    let fresh = |capacity: usize| protobuf::columns::Plan::new(&declared.message, declared.arrow.fields(), capacity);
    let flush = |plan: &mut protobuf::columns::Plan, rows: &mut Rows| {
        let batch =
            RecordBatch::try_new(declared.arrow.clone(), plan.finish()).expect("columns of the declared message");
        rows.batches.push(batch);
    };
    let mut rows = Rows::default();
    let mut plan = fresh(bodies.len());
    let mut members: Vec<usize> = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        match plan.row(&[&*body.bytes]) {
            Ok(()) => members.push(i),
            Err(e) => {
                rows.failed.push((i, format!("not a valid Protobuf {} message: {e}", declared.message.full_name())));
                plan = fresh(members.len());
                if !members.is_empty() {
                    for &m in &members {
                        plan.row(&[&*bodies[m].bytes]).expect("a value that was read once is read again");
                    }
                    flush(&mut plan, &mut rows);
                    members.clear();
                }
                plan = fresh(bodies.len() - i);
            }
        }
    }
    if !members.is_empty() {
        flush(&mut plan, &mut rows);
    }
    rows
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

/// The provenance columns appended to every decoded row (`_key` in the type `key` gives it).
fn provenance_fields(key: &Key) -> [Field; 4] {
    [
        Field::new("_partition", DataType::Int32, false),
        Field::new("_offset", DataType::Int64, false),
        Field::new("_timestamp", DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())), true),
        Field::new("_key", key.data_type(), true),
    ]
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Int64Type;

    use super::*;
    use crate::formats::encode_json_values;

    fn msg(offset: i64, payload: &[u8]) -> RawMessage {
        RawMessage::new(2, offset, Some(1_700_000_000_000 + offset), Some(b"k"), Some(payload), vec![])
    }

    fn decoder(format: DataFormat, schema: &str, message: Option<&str>) -> Decoder {
        Decoder::plain(Format::parse(format, schema, message).unwrap())
    }

    fn offsets(decoded: &Decoded) -> Vec<i64> {
        decoded.batch.column_by_name("_offset").unwrap().as_primitive::<Int64Type>().values().to_vec()
    }

    #[test]
    fn rows_carry_where_they_came_from_and_bad_messages_become_dead_letters_in_order() {
        let d = decoder(
            DataFormat::Json,
            r#"{"type":"object","required":["id"],"properties":{"id":{"type":"integer"},"name":{"type":"string"}}}"#,
            None,
        );
        let tombstone = RawMessage::new(2, 14, None, Some(b"k"), None, vec![]);
        let decoded = d.decode(vec![
            msg(10, br#"{"id": 1, "name": "a"}"#),
            msg(11, b"not json"),
            msg(12, br#"{"id": 2}"#),
            msg(13, br#"{"name": "no id"}"#),
            tombstone,
        ]);
        let names: Vec<&str> = decoded.batch.schema_ref().fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["id", "name", "_partition", "_offset", "_timestamp", "_key", "_headers"]);
        assert_eq!(decoded.batch.column(0).as_primitive::<Int64Type>().values(), &[1, 2]);
        assert_eq!(offsets(&decoded), [10, 12]);
        assert!(decoded.batch.column(1).is_null(1));
        let dead: Vec<(i64, &str)> = decoded.dead.iter().map(|d| (d.message.offset, d.error.as_str())).collect();
        assert_eq!(dead[1], (13, "required property `id` is missing or null"));
        assert_eq!(dead[2], (14, "the message has no value (a tombstone)"));
        assert_eq!(dead.len(), 3);
        let nothing = d.decode(vec![]);
        assert_eq!((nothing.batch.num_rows(), nothing.dead.len()), (0, 0));
    }

    const AVRO: &str =
        r#"{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}"#;

    fn avro_values(ids: &[i64]) -> Vec<Vec<u8>> {
        let values: Vec<String> = ids.iter().map(|i| format!(r#"{{"id": {i}, "name": "n{i}"}}"#)).collect();
        encode_json_values(&Format::parse(DataFormat::Avro, AVRO, None).unwrap(), &values, None).unwrap()
    }

    #[test]
    fn avro_datums_around_bad_ones_all_decode_in_order() {
        let d = decoder(DataFormat::Avro, AVRO, None);
        let good = avro_values(&[1, 2, 3, 4]);
        let mut trailing = good[2].clone();
        trailing.extend_from_slice(b"junk");
        let cut = &good[1][..good[1].len() - 1];
        let decoded = d.decode(vec![
            msg(0, &good[0]),
            msg(1, cut),
            msg(2, &good[1]),
            msg(3, &trailing),
            msg(4, &good[3]),
            msg(5, &good[2]),
        ]);
        assert_eq!(decoded.batch.column(0).as_primitive::<Int64Type>().values(), &[1, 2, 4, 3]);
        assert_eq!(offsets(&decoded), [0, 2, 4, 5]);
        let dead: Vec<i64> = decoded.dead.iter().map(|d| d.message.offset).collect();
        assert_eq!(dead, [1, 3]);
        assert!(decoded.dead[0].error.starts_with("not a complete, valid Avro record"), "{}", decoded.dead[0].error);
        assert_eq!(
            decoded.dead[1].error,
            "the value holds 4 bytes after the Avro record: it is not one record of its writer schema"
        );
    }

    #[test]
    fn protobuf_values_decode_and_garbage_is_a_dead_letter() {
        let proto = "syntax = \"proto3\"; package p; message M { int64 id = 1; repeated string tags = 2; }";
        let format = Format::parse(DataFormat::Protobuf, proto, Some("p.M")).unwrap();
        let values =
            encode_json_values(&format, &[r#"{"id": 7, "tags": ["a", "b"]}"#.into(), "{}".into()], None).unwrap();
        let decoded =
            Decoder::plain(format).decode(vec![msg(0, &values[0]), msg(1, &[0x0a, 0xff]), msg(2, &values[1])]);
        assert_eq!(decoded.batch.column(0).as_primitive::<Int64Type>().values(), &[7, 0]);
        let tags = decoded.batch.column(1).as_list::<i32>();
        assert_eq!((tags.value(0).len(), tags.value(1).len()), (2, 0));
        assert_eq!(decoded.dead.len(), 1);
        assert!(decoded.dead[0].error.starts_with("not a valid Protobuf p.M message"), "{}", decoded.dead[0].error);
    }

    /// A run whose framed messages change writer schema and message path
    /// mid-run: each is read with its own (a run looks a writer up again
    /// only when the id changes, and checks a path again only when it does).
    #[test]
    fn a_run_of_mixed_writers_and_message_paths_reads_each_message_with_its_own() {
        use super::super::confluent::frame;
        use crate::embedded::registry::EmbeddedRegistry;
        use crate::publisher::source::SchemaRegistry;
        use registry::{RegistryClient, SchemaType, value_subject};

        let registry = EmbeddedRegistry::start().unwrap();
        let proto = "syntax = \"proto3\"; package p; message M { int64 id = 1; } message Other { string s = 1; }";
        let format = Format::parse(DataFormat::Protobuf, proto, Some("p.M")).unwrap();
        let v1 = registry.register(&value_subject("t"), SchemaType::Protobuf, proto, vec![]).unwrap();
        let evolved = "syntax = \"proto3\"; package p; message M { int64 id = 1; string note = 2; } message Other { string s = 1; }";
        let v2 = registry.register(&value_subject("t"), SchemaType::Protobuf, evolved, vec![]).unwrap();
        let client = RegistryClient::new(&SchemaRegistry { url: registry.url(), ..SchemaRegistry::default() }).unwrap();
        let writers = WriterSchemas::new(client, format.clone(), value_subject("t"), None);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(writers.prepare([v1, v2].into_iter().map(registry::SchemaId::Confluent)));
        let value = |id: i64| encode_json_values(&format, &[format!(r#"{{"id": {id}}}"#)], None).unwrap().remove(0);
        // Path [0] is M, path [1] is Other: not the declared message.
        let framed = [
            frame(v1, Some(&[0]), &value(1)),
            frame(v1, Some(&[1]), &value(2)),
            frame(v2, Some(&[0]), &value(3)),
            frame(v2, Some(&[0]), &value(4)),
            frame(v2, Some(&[1]), &value(5)),
            frame(v1, Some(&[0]), &value(6)),
            frame(4242, Some(&[0]), &value(7)),
            frame(v1, Some(&[0]), &value(8)),
        ];
        let messages = framed.iter().enumerate().map(|(i, v)| msg(i as i64, v)).collect();
        let decoded = Decoder::new(Part::new(format, Some(writers)), Key::Bytes, false).decode(messages);
        assert_eq!(decoded.batch.column(0).as_primitive::<Int64Type>().values(), &[1, 3, 4, 6, 8]);
        let ids = decoded.batch.column_by_name("_schema_id").unwrap().as_primitive::<arrow::datatypes::Int32Type>();
        assert_eq!(ids.values(), &[v1 as i32, v2 as i32, v2 as i32, v1 as i32, v1 as i32]);
        let dead: Vec<(i64, &str)> = decoded.dead.iter().map(|d| (d.message.offset, d.error.as_str())).collect();
        assert_eq!(dead.len(), 3, "{dead:#?}");
        assert_eq!((dead[0].0, dead[1].0, dead[2].0), (1, 4, 6));
        assert!(dead[0].1.contains("is a p.Other") && dead[0].1.contains(&format!("schema id {v1}")), "{}", dead[0].1);
        assert!(dead[1].1.contains("is a p.Other") && dead[1].1.contains(&format!("schema id {v2}")), "{}", dead[1].1);
        assert_eq!(dead[2].1, "schema id 4242 was never fetched from the registry");
    }
}
