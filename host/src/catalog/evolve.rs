//! How a batch may change its table's schema. The first committed batch sets
//! it; a later batch may add columns (every Delta column is nullable, so older
//! files read them as null); any other change is refused, naming each column
//! and both types, and the batch is not committed. Schemas are compared as
//! Delta schemas, so Arrow-only differences (`Utf8` or `Dictionary`, a list's
//! width) change nothing.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the batch's columns do not fit table `{table}`: {}. A table's first batch sets its columns; a later one may only add columns. Return the table's columns with their types (and any new ones), or write to a new table",
    .changes.join("; ")
)]
pub struct SchemaMismatch {
    pub table: String,
    pub changes: Vec<String>,
}

/// The table's new schema when `batch` changes it (`None`: unchanged), or why it may not.
pub fn evolve(table_name: &str, table: Option<&Value>, batch: &Value) -> Result<Option<Value>, SchemaMismatch> {
    let Some(table) = table else { return Ok(Some(batch.clone())) };
    let (old, new) = (fields(table), fields(batch));
    let find = |fields: &[Value], name: &str| fields.iter().find(|f| f["name"] == name).cloned();
    let mut changes = Vec::new();
    for field in &old {
        let name = field["name"].as_str().unwrap_or_default();
        match find(&new, name) {
            None => changes.push(format!("column `{name}` ({}) is missing from the batch", type_name(&field["type"]))),
            Some(other) if other["type"] != field["type"] => changes.push(format!(
                "column `{name}` is {} in the table, {} in the batch",
                type_name(&field["type"]),
                type_name(&other["type"])
            )),
            Some(_) => {}
        }
    }
    if !changes.is_empty() {
        return Err(SchemaMismatch { table: table_name.to_string(), changes });
    }
    let added: Vec<Value> =
        new.iter().filter(|f| find(&old, f["name"].as_str().unwrap_or_default()).is_none()).cloned().collect();
    if added.is_empty() {
        return Ok(None);
    }
    let mut evolved = table.clone();
    evolved["fields"] = Value::Array(old.into_iter().chain(added).collect());
    Ok(Some(evolved))
}

fn fields(schema: &Value) -> Vec<Value> {
    schema["fields"].as_array().cloned().unwrap_or_default()
}

/// A Delta type as a reader would write it: `long`, `array<string>`, `struct<a: long, b: string>`.
fn type_name(t: &Value) -> String {
    match t {
        Value::String(name) => name.clone(),
        _ => match t["type"].as_str() {
            Some("array") => format!("array<{}>", type_name(&t["elementType"])),
            Some("map") => format!("map<{}, {}>", type_name(&t["keyType"]), type_name(&t["valueType"])),
            _ => {
                let fields: Vec<String> = fields(t)
                    .iter()
                    .map(|f| format!("{}: {}", f["name"].as_str().unwrap_or_default(), type_name(&f["type"])))
                    .collect();
                format!("struct<{}>", fields.join(", "))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(fields: &[(&str, Value)]) -> Value {
        let fields: Vec<Value> =
            fields.iter().map(|(n, t)| json!({ "name": n, "type": t, "nullable": true, "metadata": {} })).collect();
        json!({ "type": "struct", "fields": fields })
    }

    #[test]
    fn the_first_batch_sets_the_schema_and_later_ones_may_add_columns() {
        let v1 = schema(&[("id", json!("long")), ("name", json!("string"))]);
        assert_eq!(evolve("t", None, &v1).unwrap(), Some(v1.clone()));
        assert_eq!(evolve("t", Some(&v1), &v1).unwrap(), None);
        // Another order is the same schema; a new column comes last.
        let reordered = schema(&[("name", json!("string")), ("extra", json!("double")), ("id", json!("long"))]);
        let v2 = evolve("t", Some(&v1), &reordered).unwrap().unwrap();
        assert_eq!(v2, schema(&[("id", json!("long")), ("name", json!("string")), ("extra", json!("double"))]));
    }

    #[test]
    fn any_other_change_names_every_column_and_both_types() {
        let v1 = schema(&[
            ("id", json!("long")),
            ("tags", json!({ "type": "array", "elementType": "string", "containsNull": true })),
            ("name", json!("string")),
        ]);
        let batch = schema(&[
            ("id", json!("string")),
            ("tags", json!({ "type": "array", "elementType": "long", "containsNull": true })),
        ]);
        let err = evolve("events/clicks", Some(&v1), &batch).unwrap_err();
        assert_eq!(
            err.changes,
            [
                "column `id` is long in the table, string in the batch",
                "column `tags` is array<string> in the table, array<long> in the batch",
                "column `name` (string) is missing from the batch",
            ]
        );
        assert!(err.to_string().starts_with("the batch's columns do not fit table `events/clicks`: column `id`"));
    }
}
