//! The one interface the stream worker decodes through: [`Decoder`] turns a
//! run of one partition's messages into rows of the declared columns and
//! the provenance columns, and dead letters for the messages that do not
//! decode, whichever format and framing they use.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, BinaryArray, Int32Array, Int64Array, RecordBatch, TimestampMicrosecondArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

use super::writers::{self, Writer, WriterSchemas};
use super::{Body, DataFormat, DeadLetter, Format, RawMessage, Rows, avro, json, protobuf, registry};

/// A writer schema as one run uses it. The Avro text is the run's own copy:
/// cloning the shared one for every message would bounce its reference
/// count between the threads decoding other partitions' runs.
/// Likewise a Protobuf writer's check of a message-index path is asked of
/// the shared writer (behind a lock) only when the path changes.
struct RunWriter {
    id: u32,
    writer: Arc<Writer>,
    avro: Option<Arc<str>>,
    /// Protobuf: the path last checked, and what was found.
    checked: Option<(Vec<i32>, Result<(), String>)>,
}

impl RunWriter {
    fn new(id: u32, writer: Arc<Writer>) -> Self {
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
/// any format, plain or registry-framed. Cheap to clone; clones share the
/// registry's writer schemas.
#[derive(Debug, Clone)]
pub struct Decoder {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    format: Format,
    json: Option<json::JsonDecoder>,
    writers: Option<WriterSchemas>,
    output: SchemaRef,
}

impl Decoder {
    /// A decoder of `format`; with `writers`, values are registry-framed.
    pub fn new(format: Format, writers: Option<WriterSchemas>) -> Self {
        let mut fields: Vec<Field> = format.columns().fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.extend(provenance_fields());
        if writers.is_some() {
            fields.push(Field::new("_schema_id", DataType::Int32, false));
        }
        let json = match &format {
            Format::Json { columns } => Some(json::JsonDecoder::new(columns.clone())),
            _ => None,
        };
        Self { inner: Arc::new(Inner { format, json, writers, output: Arc::new(Schema::new(fields)) }) }
    }

    /// The schema of decoded rows: the declared columns, then the provenance columns.
    pub fn output_schema(&self) -> &SchemaRef {
        &self.inner.output
    }

    /// The registry's writer schemas, in registry mode.
    pub fn writers(&self) -> Option<&WriterSchemas> {
        self.inner.writers.as_ref()
    }

    /// Decodes a run on the blocking pool; in registry mode it first waits
    /// (without holding a thread) until every writer schema the run names is
    /// known, through registry outages.
    pub fn spawn(&self, messages: Vec<RawMessage>) -> DecodeTask {
        let decoder = self.clone();
        DecodeTask(match &self.inner.writers {
            None => tokio::task::spawn_blocking(move || decoder.decode(messages)),
            Some(_) => tokio::spawn(async move {
                let writers = decoder.inner.writers.as_ref().expect("registry mode");
                writers.prepare(messages.iter().filter_map(|m| writers::schema_id(m.payload()?))).await;
                tokio::task::spawn_blocking(move || decoder.decode(messages)).await.expect("decoding does not panic")
            }),
        })
    }

    /// Decodes `messages` into one batch of the good ones, and dead letters for the rest.
    pub fn decode(&self, messages: Vec<RawMessage>) -> Decoded {
        let started = Instant::now();
        let inner = &*self.inner;
        let mut failed: Vec<(usize, String)> = Vec::new();
        let mut bodies: Vec<Body<'_>> = Vec::with_capacity(messages.len());
        let mut of_body: Vec<usize> = Vec::with_capacity(messages.len());
        let mut schema_ids: Vec<i32> = Vec::new();
        let mut last = None;
        for (i, message) in messages.iter().enumerate() {
            match self.body(message, &mut last) {
                Ok((body, id)) => {
                    bodies.push(body);
                    of_body.push(i);
                    if let Some(id) = id {
                        schema_ids.push(id as i32);
                    }
                }
                Err(reason) => failed.push((i, reason)),
            }
        }
        let rows = match &inner.format {
            Format::Json { .. } => inner.json.as_ref().expect("json decoder").decode(&bodies),
            Format::Avro(declared) => avro::decode(declared, &bodies),
            Format::Protobuf(declared) => protobuf_rows(declared, &bodies),
        };
        drop(bodies);
        let mut good: Vec<usize> = Vec::with_capacity(of_body.len());
        let mut good_ids: Vec<i32> = Vec::with_capacity(schema_ids.len());
        let mut bad = rows.failed.iter().peekable();
        for (b, &m) in of_body.iter().enumerate() {
            if bad.peek().is_some_and(|(i, _)| *i == b) {
                let (_, reason) = bad.next().expect("peeked");
                failed.push((m, reason.clone()));
            } else {
                good.push(m);
                if let Some(id) = schema_ids.get(b) {
                    good_ids.push(*id);
                }
            }
        }
        let columns = inner.format.columns();
        let declared = match rows.batches.len() {
            0 => RecordBatch::new_empty(columns.clone()),
            1 => rows.batches.into_iter().next().expect("one batch"),
            _ => concat_batches(columns, &rows.batches).expect("batches of the declared columns"),
        };
        let batch = self.with_provenance(declared, &messages, &good, inner.writers.is_some().then_some(&good_ids));
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

    /// A message's value without its framing, or why it cannot be decoded.
    /// `last` is the writer schema the run's previous framed message named:
    /// a run's messages mostly share one, which is then looked up once.
    fn body<'m>(
        &self,
        message: &'m RawMessage,
        last: &mut Option<RunWriter>,
    ) -> Result<(Body<'m>, Option<u32>), String> {
        let value = message.payload().ok_or("the message has no value (a tombstone)")?;
        let Some(writers) = &self.inner.writers else { return Ok((Body::plain(value), None)) };
        let protobuf = self.inner.format.data_format() == DataFormat::Protobuf;
        let framed = registry::unframe(value, protobuf)?;
        let run_writer = match last {
            Some(w) if w.id == framed.schema_id => w,
            _ => match writers.get(framed.schema_id) {
                Some(writer) => last.insert(RunWriter::new(framed.schema_id, writer)),
                None => return Err(format!("schema id {} was never fetched from the registry", framed.schema_id)),
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

    fn with_provenance(
        &self,
        batch: RecordBatch,
        messages: &[RawMessage],
        good: &[usize],
        ids: Option<&Vec<i32>>,
    ) -> RecordBatch {
        let rows = || good.iter().map(|&i| &messages[i]);
        let mut columns = batch.columns().to_vec();
        let extra: [ArrayRef; 4] = [
            Arc::new(Int32Array::from_iter_values(rows().map(|m| m.partition))),
            Arc::new(Int64Array::from_iter_values(rows().map(|m| m.offset))),
            Arc::new(
                TimestampMicrosecondArray::from_iter(rows().map(|m| m.timestamp.map(|ms| ms * 1000)))
                    .with_timezone("+00:00"),
            ),
            Arc::new(BinaryArray::from_iter(rows().map(|m| m.key()))),
        ];
        columns.extend(extra);
        if let Some(ids) = ids {
            columns.push(Arc::new(Int32Array::from(ids.clone())));
        }
        RecordBatch::try_new(self.inner.output.clone(), columns).expect("provenance columns match the output schema")
    }
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
        match plan.row(&[body.bytes]) {
            Ok(()) => members.push(i),
            Err(e) => {
                rows.failed.push((i, format!("not a valid Protobuf {} message: {e}", declared.message.full_name())));
                plan = fresh(members.len());
                if !members.is_empty() {
                    for &m in &members {
                        plan.row(&[bodies[m].bytes]).expect("a value that was read once is read again");
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

/// The provenance columns appended to every decoded row.
pub fn provenance_fields() -> [Field; 4] {
    [
        Field::new("_partition", DataType::Int32, false),
        Field::new("_offset", DataType::Int64, false),
        Field::new("_timestamp", DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())), true),
        Field::new("_key", DataType::Binary, true),
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
        Decoder::new(Format::parse(format, schema, message).unwrap(), None)
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
        assert_eq!(names, ["id", "name", "_partition", "_offset", "_timestamp", "_key"]);
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
            Decoder::new(format, None).decode(vec![msg(0, &values[0]), msg(1, &[0x0a, 0xff]), msg(2, &values[1])]);
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
        use crate::embedded::registry::EmbeddedRegistry;
        use crate::publisher::source::SchemaRegistry;
        use registry::{RegistryClient, SchemaType, frame, value_subject};

        let registry = EmbeddedRegistry::start().unwrap();
        let proto = "syntax = \"proto3\"; package p; message M { int64 id = 1; } message Other { string s = 1; }";
        let format = Format::parse(DataFormat::Protobuf, proto, Some("p.M")).unwrap();
        let v1 = registry.register(&value_subject("t"), SchemaType::Protobuf, proto, vec![]).unwrap();
        let evolved = "syntax = \"proto3\"; package p; message M { int64 id = 1; string note = 2; } message Other { string s = 1; }";
        let v2 = registry.register(&value_subject("t"), SchemaType::Protobuf, evolved, vec![]).unwrap();
        let client = RegistryClient::new(&SchemaRegistry { url: registry.url(), ..SchemaRegistry::default() }).unwrap();
        let writers = writers::WriterSchemas::new(client, format.clone(), "t", None);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(writers.prepare([v1, v2].into_iter()));
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
        let decoded = Decoder::new(format, Some(writers)).decode(messages);
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
