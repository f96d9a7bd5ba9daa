//! Checkpoints: the table's state at one version as one parquet file, so
//! that opening a long table reads it and at most
//! [`CHECKPOINT_INTERVAL`](super::CHECKPOINT_INTERVAL) commits after it. Made
//! from the log itself (weir's commits and any other writer's), so it holds
//! what every reader of the log holds.

use std::sync::Arc;

use anyhow::Context as _;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde_json::{Value, json};

use super::log::{LogState, checkpoint_file, log_dir};
use crate::store::Store;
use crate::tables::file::{self, Kind};

/// Writes the checkpoint of `state` and points `_last_checkpoint` at it.
pub(super) fn write(store: &Store, dir: &str, state: &LogState) -> anyhow::Result<()> {
    let head = &state.head;
    let mut actions = Vec::new();
    actions.extend(head.protocol.iter().map(|p| json!({ "protocol": p })));
    actions.extend(head.metadata.iter().map(|m| json!({ "metaData": m })));
    for file in &state.files {
        // The fields the checkpoint keeps; the file stays as its writer added it.
        let add = &file.add;
        actions.push(json!({ "add": {
            "path": add["path"], "partitionValues": add.get("partitionValues").cloned().unwrap_or(json!({})),
            "size": add["size"], "modificationTime": add["modificationTime"], "dataChange": false,
            "stats": add.get("stats").cloned().unwrap_or(Value::Null),
        } }));
    }
    actions.extend(head.txns.iter().map(|(app, v)| json!({ "txn": { "appId": app, "version": v } })));
    let schema = checkpoint_schema();
    let mut decoder = arrow::json::ReaderBuilder::new(schema.clone()).build_decoder()?;
    decoder.serialize(&actions)?;
    let batch = decoder.flush()?.context("a checkpoint has actions")?;
    let version = state.version();
    store.put(&checkpoint_file(dir, version), file::parquet_bytes(&schema, &[batch], Kind::Table)?.into())?;
    let hint = json!({ "version": version, "size": actions.len() });
    store.put(&format!("{}/_last_checkpoint", log_dir(dir)), hint.to_string().into())
}

/// The checkpoint's columns: one struct per action kind, one row per action.
fn checkpoint_schema() -> SchemaRef {
    let utf8 = |name: &str| Field::new(name, DataType::Utf8, true);
    let long = |name: &str| Field::new(name, DataType::Int64, true);
    let strings = |name: &str| Field::new_list(name, Field::new_list_field(DataType::Utf8, true), true);
    let map = |name: &str| {
        Field::new_map(name, "key_value", Field::new("key", DataType::Utf8, false), utf8("value"), false, true)
    };
    let structure = |name: &str, fields: Vec<Field>| Field::new_struct(name, fields, true);
    Arc::new(Schema::new(vec![
        structure("txn", vec![utf8("appId"), long("version"), long("lastUpdated")]),
        structure(
            "add",
            vec![
                utf8("path"),
                map("partitionValues"),
                long("size"),
                long("modificationTime"),
                Field::new("dataChange", DataType::Boolean, true),
                utf8("stats"),
            ],
        ),
        structure(
            "remove",
            vec![
                utf8("path"),
                long("deletionTimestamp"),
                Field::new("dataChange", DataType::Boolean, true),
                Field::new("extendedFileMetadata", DataType::Boolean, true),
                map("partitionValues"),
                long("size"),
            ],
        ),
        structure(
            "metaData",
            vec![
                utf8("id"),
                utf8("name"),
                utf8("description"),
                structure("format", vec![utf8("provider"), map("options")]),
                utf8("schemaString"),
                strings("partitionColumns"),
                map("configuration"),
                long("createdTime"),
            ],
        ),
        structure(
            "protocol",
            vec![
                Field::new("minReaderVersion", DataType::Int32, true),
                Field::new("minWriterVersion", DataType::Int32, true),
                strings("readerFeatures"),
                strings("writerFeatures"),
            ],
        ),
    ]))
}
