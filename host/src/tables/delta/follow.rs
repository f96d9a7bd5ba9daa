//! What weir can write under, among other writers. weir's commits are blind
//! appends (files, transaction ids, and columns it adds), so another
//! writer's compaction, deletes, updates, vacuum, property changes and added
//! columns leave them valid, and weir commits after them. What it cannot
//! follow is a table that asks more of every writer than weir does (a writer
//! feature weir does not implement) or that no longer holds weir's columns as
//! weir writes them: there it stops, and says which version did it, who
//! wrote it, and what to do.

use serde_json::{Value, json};

use super::log::{Head, SetBy};

/// A change in the table's log that weir cannot write under. Nothing weir
/// has not committed is lost: the publisher stops with its offsets where
/// they were, and reads its batches again once the table is put right.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "table `{table}`: Delta version {version}, written by {writer}, {what}; weir cannot write into the table under it and stopped (nothing is lost: the publisher's offsets stay where they were). {todo}, then `weir publisher resume` the publisher"
)]
pub struct Blocked {
    pub table: String,
    pub version: i64,
    pub writer: String,
    pub what: String,
    pub todo: String,
}

/// Writer features weir's commits honour. Blind appends need nothing more
/// for the first three (change data feed asks for change files only where
/// rows change); the others only while the table uses none of what they
/// enable, which [`writable`] checks (a table upgraded to table features
/// lists the ones its old protocol version implied, used or not).
const WRITER_FEATURES: &[&str] = &[
    "appendOnly",
    "timestampNtz",
    "changeDataFeed",
    "invariants",
    "checkConstraints",
    "generatedColumns",
    "identityColumns",
    "columnMapping",
];

fn blocked(table: &str, by: Option<&SetBy>, what: String, todo: &str) -> Blocked {
    let (version, writer) = by.map_or((0, "an unknown writer".into()), |b| (b.version, b.writer.clone()));
    Blocked { table: table.into(), version, writer, what, todo: todo.into() }
}

fn fields(schema: &Value) -> &[Value] {
    schema["fields"].as_array().map_or(&[], Vec::as_slice)
}

fn field<'a>(schema: &'a Value, name: &str) -> Option<&'a Value> {
    fields(schema).iter().find(|f| f["name"] == name)
}

/// Whether a column's metadata asks writers to enforce something weir does not.
fn enforced(field: &Value) -> Option<&'static str> {
    let metadata = field.get("metadata")?;
    [
        ("delta.invariants", "an invariant"),
        ("delta.generationExpression", "a generated column"),
        ("delta.identity.start", "an identity column"),
    ]
    .into_iter()
    .find_map(|(key, what)| metadata.get(key).map(|_| what))
}

/// Can weir write into the table as its head has it? Checks the protocol
/// (each writer feature), the metadata's constraints and partitioning, and
/// that the table still has each of `columns` (weir's, as a Delta schema)
/// with the same type, and is partitioned by `partition_columns` as weir writes it.
pub fn writable(
    table: &str,
    head: &Head,
    columns: Option<&Value>,
    partition_columns: &[String],
) -> Result<(), Blocked> {
    if let Some(protocol) = &head.protocol {
        let by = head.protocol_by.as_ref();
        let writer_version = protocol["minWriterVersion"].as_i64().unwrap_or(0);
        if writer_version > 7 {
            return Err(blocked(
                table,
                by,
                format!("requires writer version {writer_version}, newer than weir knows"),
                "Upgrade weir",
            ));
        }
        if writer_version == 7 {
            let features: Vec<&str> = protocol["writerFeatures"]
                .as_array()
                .map(|f| f.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let unknown: Vec<&str> = features.into_iter().filter(|f| !WRITER_FEATURES.contains(f)).collect();
            if !unknown.is_empty() {
                return Err(blocked(
                    table,
                    by,
                    format!(
                        "requires the writer feature{} {} that weir does not implement (it implements {})",
                        if unknown.len() > 1 { "s" } else { "" },
                        unknown.join(", "),
                        WRITER_FEATURES.join(", ")
                    ),
                    "Drop the feature from the table (Spark: ALTER TABLE … DROP FEATURE), or restore the table to the version before",
                ));
            }
        }
    }
    let Some(metadata) = &head.metadata else { return Ok(()) };
    let by = head.metadata_by.as_ref();
    let partitioned: Vec<&str> = metadata["partitionColumns"]
        .as_array()
        .map(|p| p.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if partitioned != partition_columns {
        let what = match partitioned.is_empty() {
            true => "unpartitioned the table".to_string(),
            false => format!("partitioned the table by {}", metadata["partitionColumns"]),
        };
        let todo = match partition_columns.is_empty() {
            true => "Write the table unpartitioned again (its publisher declares no partition_by)".to_string(),
            false => format!(
                "Write the table partitioned by {partition_columns:?} again, as its publisher's partition_by declares"
            ),
        };
        return Err(blocked(table, by, what, &todo));
    }
    let configuration = metadata["configuration"].as_object();
    if let Some(key) = configuration.and_then(|c| c.keys().find(|k| k.starts_with("delta.constraints."))) {
        return Err(blocked(
            table,
            by,
            format!("added the check constraint `{}`, which weir does not enforce", &key["delta.constraints.".len()..]),
            "Drop the constraint (ALTER TABLE … DROP CONSTRAINT)",
        ));
    }
    let mode = configuration.and_then(|c| c.get("delta.columnMapping.mode")).and_then(Value::as_str);
    if mode.is_some_and(|m| m != "none") {
        return Err(blocked(
            table,
            by,
            format!("turned on column mapping (mode {})", mode.unwrap_or_default()),
            "Turn column mapping off, or restore the table to the version before",
        ));
    }
    let Some(schema) = head.schema() else { return Ok(()) };
    if let Some((name, what)) = fields(&schema).iter().find_map(|f| Some((f["name"].clone(), enforced(f)?))) {
        return Err(blocked(
            table,
            by,
            format!("made {name} {what}, which weir does not enforce"),
            "Remove it from the column",
        ));
    }
    let Some(columns) = columns else { return Ok(()) };
    for ours in fields(columns) {
        let name = ours["name"].as_str().unwrap_or_default();
        match field(&schema, name) {
            None => {
                return Err(blocked(
                    table,
                    by,
                    format!("dropped (or renamed) the column `{name}`, which weir writes"),
                    "Add the column back as it was, or restore the table to the version before",
                ));
            }
            Some(theirs) if theirs["type"] != ours["type"] => {
                return Err(blocked(
                    table,
                    by,
                    format!("changed the column `{name}` to {}, where weir writes {}", theirs["type"], ours["type"]),
                    "Give the column its type back, or restore the table to the version before",
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// The table's columns with those of `ours` it lacks added at the end
/// (nullable: earlier files do not have them); `None` when it has them all.
/// A column both have with different types is refused.
pub fn merge_schema(table: &str, head: &Head, ours: &Value) -> Result<Option<Value>, Blocked> {
    let Some(mut schema) = head.schema() else { return Ok(Some(ours.clone())) };
    let mut added = false;
    for column in fields(ours) {
        let name = column["name"].as_str().unwrap_or_default();
        match field(&schema, name) {
            Some(theirs) if theirs["type"] != column["type"] => {
                return Err(blocked(
                    table,
                    head.metadata_by.as_ref(),
                    format!(
                        "holds the column `{name}` as {}, and this batch has it as {}",
                        theirs["type"], column["type"]
                    ),
                    "Make the publisher return the column as the table has it",
                ));
            }
            Some(_) => {}
            None => {
                let mut column = column.clone();
                column["nullable"] = json!(true);
                schema["fields"].as_array_mut().expect("a struct's fields").push(column);
                added = true;
            }
        }
    }
    Ok(added.then_some(schema))
}

/// The protocol that both `current` (the log's) and `needed` (weir's
/// columns') ask for: the higher versions, and every feature of each.
pub fn merge_protocol(current: Option<&Value>, needed: &Value) -> Option<Value> {
    let Some(current) = current else { return Some(needed.clone()) };
    let version = |p: &Value, k: &str| p[k].as_i64().unwrap_or(1);
    let features = |p: &Value, k: &str| -> Vec<String> {
        p[k].as_array().map(|f| f.iter().filter_map(|s| s.as_str().map(str::to_string)).collect()).unwrap_or_default()
    };
    let reader = version(current, "minReaderVersion").max(version(needed, "minReaderVersion"));
    let writer = version(current, "minWriterVersion").max(version(needed, "minWriterVersion"));
    let mut merged = json!({ "minReaderVersion": reader, "minWriterVersion": writer });
    for (key, applies) in [("readerFeatures", reader >= 3), ("writerFeatures", writer >= 7)] {
        let mut all = features(current, key);
        for f in features(needed, key) {
            if !all.contains(&f) {
                all.push(f);
            }
        }
        if applies {
            merged[key] = json!(all);
        }
    }
    (merged != *current).then_some(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(protocol: Value, schema: Value, configuration: Value) -> Head {
        let by = Some(SetBy { version: 11, writer: "delta-rs.0.28 (OPTIMIZE)".into() });
        Head {
            version: 11,
            protocol: Some(protocol),
            protocol_by: by.clone(),
            metadata: Some(json!({
                "schemaString": schema.to_string(), "partitionColumns": [], "configuration": configuration,
            })),
            metadata_by: by,
            txns: Default::default(),
            placed: Default::default(),
        }
    }

    fn schema(fields: &[(&str, &str)]) -> Value {
        let fields: Vec<Value> =
            fields.iter().map(|(n, t)| json!({"name": n, "type": t, "nullable": true, "metadata": {}})).collect();
        json!({ "type": "struct", "fields": fields })
    }

    fn plain() -> Value {
        json!({ "minReaderVersion": 1, "minWriterVersion": 2 })
    }

    #[test]
    fn weir_writes_under_compaction_added_columns_and_properties() {
        let ours = schema(&[("id", "long")]);
        let theirs = schema(&[("id", "long"), ("note", "string")]);
        let h = head(plain(), theirs, json!({"delta.logRetentionDuration": "interval 30 days"}));
        assert_eq!(writable("events/t", &h, Some(&ours), &[]), Ok(()));
        let features = json!({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["timestampNtz"],
                              "writerFeatures": ["timestampNtz", "appendOnly", "changeDataFeed"]});
        assert_eq!(
            writable("events/t", &head(features, schema(&[("id", "long")]), json!({})), Some(&ours), &[]),
            Ok(())
        );
    }

    #[test]
    fn a_feature_weir_does_not_implement_blocks_naming_version_writer_and_what_to_do() {
        let features = json!({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                              "writerFeatures": ["deletionVectors"]});
        let err = writable("events/t", &head(features, schema(&[("id", "long")]), json!({})), None, &[]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("Delta version 11, written by delta-rs.0.28 (OPTIMIZE)"), "{text}");
        assert!(text.contains("writer feature deletionVectors"), "{text}");
        assert!(text.contains("DROP FEATURE") && text.contains("weir publisher resume"), "{text}");
    }

    #[test]
    fn a_dropped_or_retyped_column_blocks_and_so_do_constraints_mapping_and_partitions() {
        let ours = schema(&[("id", "long"), ("name", "string")]);
        let dropped = writable("t", &head(plain(), schema(&[("id", "long")]), json!({})), Some(&ours), &[]);
        assert!(dropped.unwrap_err().what.contains("dropped (or renamed) the column `name`"));
        let retyped =
            writable("t", &head(plain(), schema(&[("id", "string"), ("name", "string")]), json!({})), Some(&ours), &[]);
        assert!(retyped.unwrap_err().what.contains("changed the column `id` to \"string\""));
        let constraint = head(plain(), ours.clone(), json!({"delta.constraints.positive": "id > 0"}));
        assert!(writable("t", &constraint, None, &[]).unwrap_err().what.contains("check constraint `positive`"));
        let mapping = head(plain(), ours.clone(), json!({"delta.columnMapping.mode": "name"}));
        assert!(writable("t", &mapping, None, &[]).unwrap_err().what.contains("column mapping"));
        let mut partitioned = head(plain(), ours, json!({}));
        partitioned.metadata.as_mut().unwrap()["partitionColumns"] = json!(["id"]);
        assert!(writable("t", &partitioned, None, &[]).unwrap_err().what.contains("partitioned"));
        // Partitioned as weir writes it, it is writable; unpartitioned under a partitioned publisher, it is not.
        assert_eq!(writable("t", &partitioned, None, &["id".to_string()]), Ok(()));
        let plain_head = head(plain(), schema(&[("id", "long")]), json!({}));
        let err = writable("t", &plain_head, None, &["id".to_string()]).unwrap_err();
        assert!(err.what.contains("unpartitioned the table") && err.todo.contains("partitioned by [\"id\"]"), "{err}");
    }

    #[test]
    fn merging_keeps_the_tables_columns_and_adds_weirs_new_ones() {
        let h = head(plain(), schema(&[("id", "long"), ("note", "string")]), json!({}));
        let merged = merge_schema("t", &h, &schema(&[("id", "long"), ("extra", "string")])).unwrap().unwrap();
        let names: Vec<&str> = fields(&merged).iter().map(|f| f["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["id", "note", "extra"]);
        assert_eq!(merge_schema("t", &h, &schema(&[("id", "long")])).unwrap(), None);
        assert!(merge_schema("t", &h, &schema(&[("note", "long")])).is_err());
    }

    #[test]
    fn protocols_merge_to_the_higher_versions_and_every_feature() {
        let ntz = json!({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["timestampNtz"],
                         "writerFeatures": ["timestampNtz"]});
        let cdf = json!({"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["changeDataFeed"]});
        let merged = merge_protocol(Some(&cdf), &ntz).unwrap();
        assert_eq!(merged["writerFeatures"], json!(["changeDataFeed", "timestampNtz"]));
        assert_eq!(merged["readerFeatures"], json!(["timestampNtz"]));
        assert_eq!(merge_protocol(Some(&ntz), &plain()), None, "nothing to change");
    }
}
