//! A table's columns as Iceberg has them: the Delta schema the catalog keeps,
//! with a field id for every field (nested ones too). Ids are the table's for
//! good: a column keeps its id in every later schema, and a new column takes
//! the next unused one, so evolution by added columns is Iceberg's own.
//!
//! The data files carry no field ids (they are the Delta table's files too),
//! so the table's `schema.name-mapping.default` maps names to ids, as the
//! Iceberg spec provides for files written without them.

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

/// The Iceberg struct for Delta struct `delta`, ids reused from `previous`
/// (an Iceberg struct of the same table) by name; new fields numbered after
/// `last_id`, which ends as the highest id given. Columns of `previous` the
/// Delta schema lacks stay, in their place (a table never loses a column).
pub fn to_iceberg(delta: &Value, previous: Option<&Value>, last_id: &mut i64) -> anyhow::Result<Value> {
    let delta_fields = delta["fields"].as_array().context("a Delta struct has fields")?;
    let old_fields = previous.and_then(|p| p["fields"].as_array()).cloned().unwrap_or_default();
    let mut fields = Vec::new();
    for old in &old_fields {
        match delta_fields.iter().find(|f| f["name"] == old["name"]) {
            Some(field) => fields.push(field_of(field, Some(old), last_id)?),
            None => fields.push(old.clone()),
        }
    }
    for field in delta_fields {
        if !old_fields.iter().any(|o| o["name"] == field["name"]) {
            fields.push(field_of(field, None, last_id)?);
        }
    }
    Ok(json!({"type": "struct", "fields": fields}))
}

fn field_of(delta: &Value, previous: Option<&Value>, last_id: &mut i64) -> anyhow::Result<Value> {
    let name = delta["name"].as_str().context("a Delta field has a name")?;
    let id = match previous {
        Some(p) => p["id"].as_i64().context("an Iceberg field has an id")?,
        None => next(last_id),
    };
    let kind =
        type_of(&delta["type"], previous.map(|p| &p["type"]), last_id).with_context(|| format!("column `{name}`"))?;
    Ok(json!({"id": id, "name": name, "required": !delta["nullable"].as_bool().unwrap_or(true), "type": kind}))
}

fn next(last_id: &mut i64) -> i64 {
    *last_id += 1;
    *last_id
}

fn type_of(delta: &Value, previous: Option<&Value>, last_id: &mut i64) -> anyhow::Result<Value> {
    if let Some(name) = delta.as_str() {
        return Ok(json!(primitive(name)?));
    }
    let reuse = |key: &str, last_id: &mut i64| previous.and_then(|p| p[key].as_i64()).unwrap_or_else(|| next(last_id));
    Ok(match delta["type"].as_str() {
        Some("struct") => to_iceberg(delta, previous, last_id)?,
        Some("array") => {
            let id = reuse("element-id", last_id);
            json!({
                "type": "list", "element-id": id,
                "element": type_of(&delta["elementType"], previous.map(|p| &p["element"]), last_id)?,
                "element-required": !delta["containsNull"].as_bool().unwrap_or(true),
            })
        }
        Some("map") => {
            let (key_id, value_id) = (reuse("key-id", last_id), reuse("value-id", last_id));
            json!({
                "type": "map", "key-id": key_id, "value-id": value_id,
                "key": type_of(&delta["keyType"], previous.map(|p| &p["key"]), last_id)?,
                "value": type_of(&delta["valueType"], previous.map(|p| &p["value"]), last_id)?,
                "value-required": !delta["valueContainsNull"].as_bool().unwrap_or(true),
            })
        }
        _ => bail!("a Delta type Iceberg has no counterpart for: {delta}"),
    })
}

/// Delta's primitive types in Iceberg's words. Delta's `timestamp` is an
/// instant (UTC), Iceberg's `timestamptz`; Iceberg's `int` takes Delta's
/// narrower integers as well.
fn primitive(delta: &str) -> anyhow::Result<String> {
    Ok(match delta {
        "string" | "long" | "float" | "double" | "boolean" | "binary" | "date" => delta.to_string(),
        "integer" | "short" | "byte" => "int".into(),
        "timestamp" => "timestamptz".into(),
        "timestamp_ntz" => "timestamp".into(),
        d if d.starts_with("decimal(") => d.replace(' ', "").replace(',', ", "),
        other => bail!("Iceberg has no type for Delta's `{other}`"),
    })
}

/// The name mapping of an Iceberg struct: every field's id by its name in the
/// files (`element`, `key` and `value` inside lists and maps).
pub fn name_mapping(iceberg: &Value) -> Value {
    fn fields_of(kind: &Value) -> Option<Vec<Value>> {
        match kind["type"].as_str()? {
            "struct" => {
                Some(kind["fields"].as_array()?.iter().map(|f| entry(&f["name"], &f["id"], &f["type"])).collect())
            }
            "list" => Some(vec![entry(&json!("element"), &kind["element-id"], &kind["element"])]),
            "map" => Some(vec![
                entry(&json!("key"), &kind["key-id"], &kind["key"]),
                entry(&json!("value"), &kind["value-id"], &kind["value"]),
            ]),
            _ => None,
        }
    }
    fn entry(name: &Value, id: &Value, kind: &Value) -> Value {
        let mut e = json!({"field-id": id, "names": [name]});
        if let Some(fields) = fields_of(kind) {
            e["fields"] = Value::Array(fields);
        }
        e
    }
    Value::Array(fields_of(iceberg).unwrap_or_default())
}

/// A top-level field of an Iceberg struct, by name.
pub fn field<'a>(iceberg: &'a Value, name: &str) -> Option<&'a Value> {
    iceberg["fields"].as_array()?.iter().find(|f| f["name"] == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(fields: Value) -> Value {
        json!({"type": "struct", "fields": fields})
    }

    #[test]
    fn ids_are_kept_and_new_columns_take_the_next() {
        let first = delta(json!([
            {"name": "id", "type": "long", "nullable": false, "metadata": {}},
            {"name": "tags", "type": {"type": "array", "elementType": "string", "containsNull": true}, "nullable": true, "metadata": {}},
            {"name": "_timestamp", "type": "timestamp", "nullable": true, "metadata": {}},
        ]));
        let mut last = 0;
        let v1 = to_iceberg(&first, None, &mut last).unwrap();
        assert_eq!(last, 4);
        assert_eq!(v1["fields"][0], json!({"id": 1, "name": "id", "required": true, "type": "long"}));
        assert_eq!(
            v1["fields"][1]["type"],
            json!({"type": "list", "element-id": 3, "element": "string", "element-required": false})
        );
        assert_eq!(v1["fields"][2]["type"], "timestamptz");
        // A new column, in the middle of the batch's columns: it comes last, with id 5.
        let mut second = first.clone();
        second["fields"]
            .as_array_mut()
            .unwrap()
            .insert(1, json!({"name": "n", "type": "decimal(10,2)", "nullable": true, "metadata": {}}));
        let v2 = to_iceberg(&second, Some(&v1), &mut last).unwrap();
        assert_eq!(last, 5);
        assert_eq!(&v2["fields"].as_array().unwrap()[..3], &v1["fields"].as_array().unwrap()[..]);
        assert_eq!(v2["fields"][3], json!({"id": 5, "name": "n", "required": false, "type": "decimal(10, 2)"}));
        let mapping = name_mapping(&v2);
        assert_eq!(
            mapping[1],
            json!({"field-id": 2, "names": ["tags"], "fields": [{"field-id": 3, "names": ["element"]}]})
        );
    }

    #[test]
    fn a_type_iceberg_lacks_is_named() {
        let odd = delta(json!([{"name": "v", "type": "variant", "nullable": true, "metadata": {}}]));
        let e = to_iceberg(&odd, None, &mut 0).unwrap_err();
        assert!(format!("{e:#}").contains("column `v`: Iceberg has no type for Delta's `variant`"), "{e:#}");
    }
}
