//! Manifests (which data files a snapshot has, with their partition and
//! column statistics) and manifest lists (which manifests), as Iceberg's v2
//! spec lays them out, field ids included.

use anyhow::{Context as _, bail};
use chrono::{Datelike as _, NaiveDate, NaiveDateTime};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::avro::{self, Datum};
use super::schema;
use crate::tables::partition::{PartitionField, PartitionSpec, Transform};

/// A partition value, typed as its partition field's result.
#[derive(Debug, Clone, PartialEq, PartialOrd, Serialize, Deserialize)]
pub enum Literal {
    Bool(bool),
    Int(i32),
    Long(i64),
    Str(String),
}

impl Literal {
    fn datum(&self) -> Datum {
        match self {
            Literal::Bool(b) => Datum::Bool(*b),
            Literal::Int(i) => Datum::Int(*i),
            Literal::Long(l) => Datum::Long(*l),
            Literal::Str(s) => Datum::Str(s.clone()),
        }
    }

    /// Iceberg's single-value serialization (bounds in manifests and lists).
    fn bytes(&self) -> Vec<u8> {
        match self {
            Literal::Bool(b) => vec![*b as u8],
            Literal::Int(i) => i.to_le_bytes().to_vec(),
            Literal::Long(l) => l.to_le_bytes().to_vec(),
            Literal::Str(s) => s.as_bytes().to_vec(),
        }
    }
}

/// One partition field of the table's Iceberg spec.
#[derive(Debug, Clone)]
pub struct SpecField {
    pub field: PartitionField,
    /// Its name: the derived column's (`_timestamp_day`) or the column's.
    pub name: String,
    pub source_id: i64,
    /// The source column's Iceberg type.
    pub source_type: String,
    /// Its own Iceberg type (what the transform gives).
    pub result_type: String,
}

/// The first partition field id, as Iceberg numbers them.
pub const FIRST_PARTITION_ID: i64 = 1000;

/// The spec's fields for `spec` over the Iceberg struct `columns`.
pub fn spec_fields(spec: &PartitionSpec, columns: &Value) -> anyhow::Result<Vec<SpecField>> {
    spec.fields
        .iter()
        .map(|f| {
            let source = schema::field(columns, &f.source)
                .with_context(|| format!("partition column `{}` is not among the table's columns", f.source))?;
            let source_type = source["type"].as_str().context("a partition column is a primitive")?.to_string();
            let result_type = match f.transform {
                Transform::Identity | Transform::Truncate(_) => source_type.clone(),
                Transform::Day => "date".into(),
                Transform::Year | Transform::Month | Transform::Hour | Transform::Bucket(_) => "int".into(),
            };
            if !matches!(result_type.as_str(), "string" | "int" | "long" | "boolean" | "date" | "timestamp" | "timestamptz")
            {
                bail!("partition_by entry `{}`: Iceberg tables partition by {result_type} columns only through bucket(N, col)", f.text());
            }
            let source_id = source["id"].as_i64().context("a field id")?;
            Ok(SpecField { field: f.clone(), name: f.column(), source_id, source_type, result_type })
        })
        .collect()
}

/// The partition spec, as the table metadata and each manifest name it.
pub fn spec_json(fields: &[SpecField]) -> Value {
    let fields: Vec<Value> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let transform = match f.field.transform {
                Transform::Identity => "identity".to_string(),
                Transform::Year => "year".into(),
                Transform::Month => "month".into(),
                Transform::Day => "day".into(),
                Transform::Hour => "hour".into(),
                Transform::Bucket(n) => format!("bucket[{n}]"),
                Transform::Truncate(w) => format!("truncate[{w}]"),
            };
            json!({"source-id": f.source_id, "field-id": FIRST_PARTITION_ID + i as i64, "name": f.name, "transform": transform})
        })
        .collect();
    Value::Array(fields)
}

/// A file's partition value for `field`, from the text the Delta log has.
pub fn partition_value(field: &SpecField, text: Option<&str>) -> anyhow::Result<Option<Literal>> {
    let Some(text) = text else { return Ok(None) };
    let bad = || format!("partition value {text:?} of `{}`", field.name);
    let date = || NaiveDate::parse_from_str(text, "%Y-%m-%d").with_context(bad);
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).expect("a date");
    let micros = || -> anyhow::Result<i64> {
        let at = NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f").with_context(bad)?;
        Ok(at.and_utc().timestamp_micros())
    };
    Ok(Some(match field.field.transform {
        Transform::Year => Literal::Int(date()?.year() - 1970),
        Transform::Month => {
            let d = date()?;
            Literal::Int((d.year() - 1970) * 12 + d.month0() as i32)
        }
        Transform::Day => Literal::Int((date()? - epoch).num_days() as i32),
        Transform::Hour => Literal::Int(micros()?.div_euclid(3_600_000_000) as i32),
        Transform::Bucket(_) => Literal::Int(text.parse().with_context(bad)?),
        Transform::Identity | Transform::Truncate(_) => match field.source_type.as_str() {
            "string" => Literal::Str(text.to_string()),
            "int" => Literal::Int(text.parse().with_context(bad)?),
            "long" => Literal::Long(text.parse().with_context(bad)?),
            "boolean" => Literal::Bool(text.parse().with_context(bad)?),
            "date" => Literal::Int((date()? - epoch).num_days() as i32),
            "timestamp" | "timestamptz" => Literal::Long(micros()?),
            other => bail!("{}: a {other} partition value", bad()),
        },
    }))
}

fn avro_type(iceberg: &str) -> Value {
    match iceberg {
        "date" => json!({"type": "int", "logicalType": "date"}),
        "timestamptz" => json!({"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": true}),
        "timestamp" => json!({"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": false}),
        other => json!(other),
    }
}

/// A data file as a manifest entry has it.
#[derive(Debug, Clone)]
pub struct EntryFile {
    /// Where it is, as readers open it (`file:///…`, `s3://…`).
    pub location: String,
    pub size: u64,
    pub rows: u64,
    /// Its partition, one value a spec field.
    pub partition: Vec<Option<Literal>>,
    /// Its Delta statistics (the `add` action's `stats`), for Iceberg's.
    pub stats: Option<String>,
    /// The snapshot (weir version) that added it, and so its sequence number.
    pub added_in: i64,
}

/// One manifest of a manifest list, as the catalog keeps it (so that a
/// later snapshot's list names it again without reading it back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestFile {
    pub location: String,
    pub length: u64,
    pub sequence_number: i64,
    pub min_sequence_number: i64,
    pub added_snapshot_id: i64,
    pub added_files: i32,
    pub existing_files: i32,
    pub added_rows: i64,
    pub existing_rows: i64,
    /// Per partition field: (contains null, lower bound, upper bound).
    pub partitions: Vec<(bool, Option<Vec<u8>>, Option<Vec<u8>>)>,
}

fn map_schema(id: i64, key_id: i64, value_id: i64, value: &str) -> Value {
    json!({"type": "array", "logicalType": "map", "items": {
        "type": "record", "name": format!("k{key_id}_v{value_id}"),
        "fields": [{"name": "key", "type": "int", "field-id": key_id}, {"name": "value", "type": value, "field-id": value_id}],
    }, "element-id": id})
}

fn optional(name: &str, kind: Value, id: i64) -> Value {
    json!({"name": name, "type": ["null", kind], "default": null, "field-id": id})
}

fn manifest_schema(spec: &[SpecField]) -> Value {
    let partition: Vec<Value> = spec
        .iter()
        .enumerate()
        .map(|(i, f)| optional(&f.name, avro_type(&f.result_type), FIRST_PARTITION_ID + i as i64))
        .collect();
    let data_file = json!({"type": "record", "name": "r2", "fields": [
        {"name": "content", "type": "int", "field-id": 134},
        {"name": "file_path", "type": "string", "field-id": 100},
        {"name": "file_format", "type": "string", "field-id": 101},
        {"name": "partition", "type": {"type": "record", "name": "r102", "fields": partition}, "field-id": 102},
        {"name": "record_count", "type": "long", "field-id": 103},
        {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
        optional("value_counts", map_schema(109, 119, 120, "long"), 109),
        optional("null_value_counts", map_schema(110, 121, 122, "long"), 110),
        optional("lower_bounds", map_schema(125, 126, 127, "bytes"), 125),
        optional("upper_bounds", map_schema(128, 129, 130, "bytes"), 128),
        optional("split_offsets", json!({"type": "array", "items": "long", "element-id": 133}), 132),
        optional("sort_order_id", json!("int"), 140),
    ]});
    json!({"type": "record", "name": "manifest_entry", "fields": [
        {"name": "status", "type": "int", "field-id": 0},
        optional("snapshot_id", json!("long"), 1),
        optional("sequence_number", json!("long"), 3),
        optional("file_sequence_number", json!("long"), 4),
        {"name": "data_file", "type": data_file, "field-id": 2},
    ]})
}

const MANIFEST_LIST_SCHEMA: &str = r#"{"type": "record", "name": "manifest_file", "fields": [
    {"name": "manifest_path", "type": "string", "field-id": 500},
    {"name": "manifest_length", "type": "long", "field-id": 501},
    {"name": "partition_spec_id", "type": "int", "field-id": 502},
    {"name": "content", "type": "int", "field-id": 517},
    {"name": "sequence_number", "type": "long", "field-id": 515},
    {"name": "min_sequence_number", "type": "long", "field-id": 516},
    {"name": "added_snapshot_id", "type": "long", "field-id": 503},
    {"name": "added_files_count", "type": "int", "field-id": 504},
    {"name": "existing_files_count", "type": "int", "field-id": 505},
    {"name": "deleted_files_count", "type": "int", "field-id": 506},
    {"name": "added_rows_count", "type": "long", "field-id": 512},
    {"name": "existing_rows_count", "type": "long", "field-id": 513},
    {"name": "deleted_rows_count", "type": "long", "field-id": 514},
    {"name": "partitions", "type": ["null", {"type": "array", "element-id": 508, "items": {
        "type": "record", "name": "r508", "fields": [
            {"name": "contains_null", "type": "boolean", "field-id": 509},
            {"name": "contains_nan", "type": ["null", "boolean"], "default": null, "field-id": 518},
            {"name": "lower_bound", "type": ["null", "bytes"], "default": null, "field-id": 510},
            {"name": "upper_bound", "type": ["null", "bytes"], "default": null, "field-id": 511}]}}],
     "default": null, "field-id": 507}]}"#;

/// Iceberg's column statistics from a file's Delta statistics: value and
/// null counts, and bounds of the top-level columns Delta bounds.
fn column_stats(stats: Option<&str>, columns: &Value) -> [Datum; 4] {
    let stats: Value = stats.and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default();
    let (mut values, mut nulls, mut lower, mut upper) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let pair = |id: i64, value: Datum| Datum::Record(vec![Datum::Int(id as i32), value]);
    for field in columns["fields"].as_array().into_iter().flatten() {
        let (Some(name), Some(id)) = (field["name"].as_str(), field["id"].as_i64()) else { continue };
        let Some(n) = stats["nullCount"][name].as_i64() else { continue };
        nulls.push(pair(id, Datum::Long(n)));
        if let Some(rows) = stats["numRecords"].as_i64() {
            values.push(pair(id, Datum::Long(rows)));
        }
        let bound = |v: &Value, upper: bool| -> Option<Vec<u8>> {
            Some(match field["type"].as_str()? {
                "long" => v.as_i64()?.to_le_bytes().to_vec(),
                "int" => (v.as_i64()? as i32).to_le_bytes().to_vec(),
                "double" => v.as_f64()?.to_le_bytes().to_vec(),
                "float" => (v.as_f64()? as f32).to_le_bytes().to_vec(),
                "string" => v.as_str()?.as_bytes().to_vec(),
                "date" => {
                    let d = NaiveDate::parse_from_str(v.as_str()?, "%Y-%m-%d").ok()?;
                    ((d - NaiveDate::from_ymd_opt(1970, 1, 1)?).num_days() as i32).to_le_bytes().to_vec()
                }
                // Delta's timestamps are to the millisecond, and a maximum may
                // have been cut to it: it bounds the microseconds up to 999 after.
                kind @ ("timestamp" | "timestamptz") => {
                    let text = v.as_str()?;
                    let at = if kind == "timestamptz" {
                        chrono::DateTime::parse_from_rfc3339(text).ok()?.timestamp_micros()
                    } else {
                        NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f").ok()?.and_utc().timestamp_micros()
                    };
                    (at + if upper { 999 } else { 0 }).to_le_bytes().to_vec()
                }
                _ => return None,
            })
        };
        if let (Some(lo), Some(hi)) = (bound(&stats["minValues"][name], false), bound(&stats["maxValues"][name], true))
        {
            lower.push(pair(id, Datum::Bytes(lo)));
            upper.push(pair(id, Datum::Bytes(hi)));
        }
    }
    [values, nulls, lower, upper].map(|v| Datum::opt(Some(Datum::Array(v))))
}

/// A manifest of `files` for snapshot `snapshot`: those it added (`added_in
/// == snapshot`) as added, the others as existing. Returns its bytes and its
/// entry in a manifest list (whose location is `location`).
pub fn manifest(
    files: &[EntryFile],
    snapshot: i64,
    spec: &[SpecField],
    columns: &Value,
    schema_id: i64,
    location: &str,
) -> (Vec<u8>, ManifestFile) {
    let mut entry = ManifestFile {
        location: location.to_string(),
        length: 0,
        sequence_number: snapshot,
        min_sequence_number: files.iter().map(|f| f.added_in).min().unwrap_or(snapshot),
        added_snapshot_id: snapshot,
        added_files: 0,
        existing_files: 0,
        added_rows: 0,
        existing_rows: 0,
        partitions: vec![(false, None, None); spec.len()],
    };
    let records: Vec<Datum> = files
        .iter()
        .map(|f| {
            let added = f.added_in == snapshot;
            if added {
                (entry.added_files, entry.added_rows) = (entry.added_files + 1, entry.added_rows + f.rows as i64);
            } else {
                (entry.existing_files, entry.existing_rows) =
                    (entry.existing_files + 1, entry.existing_rows + f.rows as i64);
            }
            for (summary, value) in entry.partitions.iter_mut().zip(&f.partition) {
                let Some(value) = value else {
                    summary.0 = true;
                    continue;
                };
                summarize(summary, value);
            }
            let partition = f.partition.iter().map(|v| Datum::opt(v.as_ref().map(Literal::datum))).collect();
            let [values, nulls, lower, upper] = column_stats(f.stats.as_deref(), columns);
            // Added entries inherit the snapshot's id and sequence number; existing ones keep theirs.
            let (snapshot_id, sequence) = match added {
                true => (Datum::opt(Some(Datum::Long(snapshot))), Datum::opt(None)),
                false => (Datum::opt(Some(Datum::Long(f.added_in))), Datum::opt(Some(Datum::Long(f.added_in)))),
            };
            Datum::Record(vec![
                Datum::Int(if added { 1 } else { 0 }),
                snapshot_id,
                sequence.clone(),
                sequence,
                Datum::Record(vec![
                    Datum::Int(0),
                    Datum::Str(f.location.clone()),
                    Datum::Str("PARQUET".into()),
                    Datum::Record(partition),
                    Datum::Long(f.rows as i64),
                    Datum::Long(f.size as i64),
                    values,
                    nulls,
                    lower,
                    upper,
                    Datum::opt(None),
                    Datum::opt(None),
                ]),
            ])
        })
        .collect();
    let metadata = [
        ("schema", serde_json::to_string(&with_id(columns, schema_id)).expect("json")),
        ("schema-id", schema_id.to_string()),
        ("partition-spec", spec_json(spec).to_string()),
        ("partition-spec-id", "0".into()),
        ("format-version", "2".into()),
        ("content", "data".into()),
    ];
    let bytes = avro::container(&manifest_schema(spec).to_string(), &metadata, &records);
    entry.length = bytes.len() as u64;
    (bytes, entry)
}

/// Widens a partition field's summary by `value`.
fn summarize(summary: &mut (bool, Option<Vec<u8>>, Option<Vec<u8>>), value: &Literal) {
    let (lower, upper, bytes) = (&mut summary.1, &mut summary.2, value.bytes());
    let decode = |b: &Vec<u8>| -> Literal {
        match value {
            Literal::Bool(_) => Literal::Bool(b.first() == Some(&1)),
            Literal::Int(_) => Literal::Int(i32::from_le_bytes(b[..4].try_into().unwrap_or_default())),
            Literal::Long(_) => Literal::Long(i64::from_le_bytes(b[..8].try_into().unwrap_or_default())),
            Literal::Str(_) => Literal::Str(String::from_utf8_lossy(b).into_owned()),
        }
    };
    if lower.as_ref().is_none_or(|l| *value < decode(l)) {
        *lower = Some(bytes.clone());
    }
    if upper.as_ref().is_none_or(|u| *value > decode(u)) {
        *upper = Some(bytes);
    }
}

/// The manifest list of a snapshot: `manifests`, newest first.
pub fn manifest_list(manifests: &[ManifestFile], snapshot: i64, parent: Option<i64>) -> Vec<u8> {
    let records: Vec<Datum> = manifests
        .iter()
        .rev()
        .map(|m| {
            let partitions = m
                .partitions
                .iter()
                .map(|(null, lo, hi)| {
                    Datum::Record(vec![
                        Datum::Bool(*null),
                        Datum::opt(Some(Datum::Bool(false))),
                        Datum::opt(lo.clone().map(Datum::Bytes)),
                        Datum::opt(hi.clone().map(Datum::Bytes)),
                    ])
                })
                .collect();
            Datum::Record(vec![
                Datum::Str(m.location.clone()),
                Datum::Long(m.length as i64),
                Datum::Int(0),
                Datum::Int(0),
                Datum::Long(m.sequence_number),
                Datum::Long(m.min_sequence_number),
                Datum::Long(m.added_snapshot_id),
                Datum::Int(m.added_files),
                Datum::Int(m.existing_files),
                Datum::Int(0),
                Datum::Long(m.added_rows),
                Datum::Long(m.existing_rows),
                Datum::Long(0),
                Datum::opt(Some(Datum::Array(partitions))),
            ])
        })
        .collect();
    let mut metadata = vec![
        ("snapshot-id", snapshot.to_string()),
        ("sequence-number", snapshot.to_string()),
        ("format-version", "2".to_string()),
    ];
    metadata.push(("parent-snapshot-id", parent.map_or("null".into(), |p| p.to_string())));
    avro::container(MANIFEST_LIST_SCHEMA, &metadata, &records)
}

/// The Iceberg struct with its schema id, as metadata and manifests name it.
pub fn with_id(columns: &Value, schema_id: i64) -> Value {
    let mut schema = columns.clone();
    schema["schema-id"] = json!(schema_id);
    schema
}
