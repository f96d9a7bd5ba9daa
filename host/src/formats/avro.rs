//! Avro messages to Arrow rows, through arrow-avro: each value is one Avro
//! binary datum of its writer schema (the declared one, or in registry mode
//! the one its schema id names), resolved to the declared schema, so every
//! row has the declared columns whatever version wrote it.
//!
//! arrow-avro appends a datum's fields as it reads them, so a datum that fails
//! half-way leaves its decoder unusable. The rows decoded since the last
//! failure are then decoded again into a fresh decoder: each good datum is
//! read at most twice, however many bad ones there are.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow_avro::reader::{Decoder, DecoderMode, ReaderBuilder};
use arrow_avro::schema::{AvroSchema as ArrowAvroSchema, Fingerprint, FingerprintAlgorithm, SchemaStore};

use super::avro_schema::AvroSchema;
use super::{Body, Rows};

/// The declared Avro schema, parsed.
#[derive(Debug, Clone)]
pub struct Declared {
    /// The schema's JSON text.
    pub text: Arc<str>,
    pub schema: AvroSchema,
    /// The record's columns, as arrow-avro reads them.
    pub arrow: SchemaRef,
}

impl Declared {
    pub fn parse(text: &str) -> Result<Self, String> {
        let schema = AvroSchema::parse(text).map_err(|e| e.to_string())?;
        let text: Arc<str> = text.into();
        let decoder = decoder(&text, &text, 1).map_err(|e| format!("cannot be read by weir's Avro decoder: {e}"))?;
        Ok(Self { text, schema, arrow: strip_schema_metadata(decoder.schema()) })
    }
}

/// A decoder of datums written with `writer`, resolved to `reader`.
pub fn decoder(writer: &str, reader: &str, capacity: usize) -> Result<Decoder, String> {
    let mut store = SchemaStore::new_with_type(FingerprintAlgorithm::Id);
    let fingerprint = Fingerprint::Id(0);
    store.set(fingerprint, ArrowAvroSchema::new(writer.to_string())).map_err(|e| e.to_string())?;
    let mut builder = ReaderBuilder::new();
    // The declared schema itself needs no resolution, and decoding without it is faster.
    if writer != reader {
        builder = builder.with_reader_schema(ArrowAvroSchema::new(reader.to_string()));
    }
    builder
        .with_writer_schema_store(store)
        .with_active_fingerprint(fingerprint)
        .with_decoder_mode(DecoderMode::UnframedDatum)
        .with_batch_size(capacity.max(1))
        .build_decoder()
        .map_err(|e| e.to_string())
}

/// The top-level schema metadata arrow-avro attaches (the whole schema's JSON)
/// would be copied into every file: the declared schema is kept elsewhere.
fn strip_schema_metadata(schema: SchemaRef) -> SchemaRef {
    Arc::new(schema.as_ref().clone().with_metadata(std::collections::HashMap::new()))
}

/// Decodes `bodies` into the declared columns; a body's `writer` is its writer
/// schema's text (`None`: the declared schema wrote it).
pub fn decode(declared: &Declared, bodies: &[Body<'_>]) -> Rows {
    let mut rows = Rows::default();
    let mut segment = Segment { writer: None, decoder: None, members: Vec::new() };
    for (i, body) in bodies.iter().enumerate() {
        // Compared by address first, and cloned only when a segment starts: a run's bodies share one text.
        let writer = body.writer.as_ref().unwrap_or(&declared.text);
        if !segment.writer.as_ref().is_some_and(|w| Arc::ptr_eq(w, writer) || w == writer) {
            segment.finish(declared, &mut rows);
            segment = Segment { writer: Some(writer.clone()), decoder: None, members: Vec::new() };
        }
        let remaining = bodies.len() - i;
        let decoder = match &mut segment.decoder {
            Some(d) => d,
            None => match decoder(writer, &declared.text, remaining) {
                Ok(d) => segment.decoder.insert(d),
                Err(e) => {
                    rows.failed.push((i, format!("its writer schema cannot be read as the declared schema: {e}")));
                    continue;
                }
            },
        };
        match decoder.decode(&body.bytes) {
            Ok(n) if n == body.bytes.len() => segment.members.push(i),
            outcome => {
                let reason = match outcome {
                    Ok(n) => format!(
                        "the value holds {} bytes after the Avro record: it is not one record of its writer schema",
                        body.bytes.len() - n
                    ),
                    Err(e) => explain(&e.to_string()),
                };
                rows.failed.push((i, reason));
                // The decoder holds part of the bad datum: decode the segment's good ones again, without it.
                segment.decoder = None;
                let members = std::mem::take(&mut segment.members);
                if !members.is_empty() {
                    let mut again = decoder_for(&segment, declared, members.len());
                    for &m in &members {
                        let read = again.decode(&bodies[m].bytes);
                        debug_assert_eq!(
                            read.ok(),
                            Some(bodies[m].bytes.len()),
                            "a datum that decoded before decodes again"
                        );
                    }
                    push_flushed(&mut again, declared, &mut rows);
                }
            }
        }
    }
    segment.finish(declared, &mut rows);
    rows.failed.sort_by_key(|(i, _)| *i);
    rows
}

/// Consecutive bodies of one writer schema, decoded into one decoder.
struct Segment {
    writer: Option<Arc<str>>,
    decoder: Option<Decoder>,
    members: Vec<usize>,
}

impl Segment {
    fn finish(&mut self, declared: &Declared, rows: &mut Rows) {
        if let Some(mut decoder) = self.decoder.take()
            && !self.members.is_empty()
        {
            push_flushed(&mut decoder, declared, rows);
        }
        self.members.clear();
    }
}

fn decoder_for(segment: &Segment, declared: &Declared, capacity: usize) -> Decoder {
    let writer = segment.writer.as_deref().unwrap_or(&declared.text);
    decoder(writer, &declared.text, capacity).expect("a decoder built before builds again")
}

fn push_flushed(decoder: &mut Decoder, declared: &Declared, rows: &mut Rows) {
    match decoder.flush() {
        Ok(Some(batch)) => {
            // The same columns whatever the writer: the declared schema's, without arrow-avro's metadata.
            let batch = RecordBatch::try_new(declared.arrow.clone(), batch.columns().to_vec())
                .expect("a resolved decoder yields the declared columns");
            rows.batches.push(batch);
        }
        Ok(None) => {}
        Err(e) => panic!("flushing datums that decoded cleanly failed: {e}"),
    }
}

/// arrow-avro's errors, in a dead letter's words: it cannot tell a cut-off
/// record from bytes that are not Avro ("bad varint" is either).
fn explain(error: &str) -> String {
    format!("not a complete, valid Avro record of its writer schema (cut short, or not Avro at all): {error}")
}

/// Encodes each row of `batch` as one Avro datum of `schema` (its JSON text);
/// with `schema_id`, framed as a registry serializer frames it. For producers:
/// the demo, the tests and the benchmark.
pub fn encode(schema: &str, batch: &RecordBatch, schema_id: Option<u32>) -> Result<Vec<Vec<u8>>, String> {
    use arrow_avro::schema::{FingerprintStrategy, SCHEMA_METADATA_KEY};
    use arrow_avro::writer::WriterBuilder;
    use arrow_avro::writer::format::{AvroBinaryFormat, AvroSoeFormat};

    let metadata: std::collections::HashMap<String, String> =
        [(SCHEMA_METADATA_KEY.to_string(), schema.to_string())].into();
    let arrow = batch.schema().as_ref().clone().with_metadata(metadata);
    let batch = RecordBatch::try_new(Arc::new(arrow.clone()), batch.columns().to_vec()).map_err(|e| e.to_string())?;
    let builder = WriterBuilder::new(arrow);
    let mut encoder = match schema_id {
        Some(id) => builder.with_fingerprint_strategy(FingerprintStrategy::Id(id)).build_encoder::<AvroSoeFormat>(),
        None => builder.build_encoder::<AvroBinaryFormat>(),
    }
    .map_err(|e| e.to_string())?;
    encoder.encode(&batch).map_err(|e| e.to_string())?;
    Ok(encoder.flush().iter().map(|row| row.to_vec()).collect())
}
