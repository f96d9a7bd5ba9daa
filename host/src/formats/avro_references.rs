//! Avro schemas that use named types defined in other subjects' schemas
//! (a registry's schema references), made to stand alone: each referenced
//! type is defined where it is first used, as if it had been written inline.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::avro_schema::full_name;

/// `main` with the named types it uses from `referenced` (other schemas, as a
/// registry's schema references name them) defined where first used, so that
/// it stands alone. A name `main` defines itself, or has defined already, is
/// left as a name.
pub fn inline_references(main: &str, referenced: &[String]) -> Result<String, String> {
    let mut known: HashMap<String, Value> = HashMap::new();
    for text in referenced {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("a referenced schema is not JSON: {e}"))?;
        collect_named(&value, None, &mut known);
    }
    let mut value: Value = serde_json::from_str(main).map_err(|e| format!("the schema is not JSON: {e}"))?;
    let mut defined = HashSet::new();
    inline(&mut value, None, &known, &mut defined);
    Ok(value.to_string())
}

/// Every named type `value` defines, by full name.
fn collect_named(value: &Value, namespace: Option<&str>, known: &mut HashMap<String, Value>) {
    match value {
        Value::Array(branches) => branches.iter().for_each(|b| collect_named(b, namespace, known)),
        Value::Object(obj) => {
            let own = obj.get("namespace").and_then(Value::as_str).or(namespace).map(str::to_string);
            if let (Some(name), Some("record" | "enum" | "fixed")) =
                (obj.get("name").and_then(Value::as_str), obj.get("type").and_then(Value::as_str))
            {
                let full = full_name(name, own.as_deref());
                let inner = full.rsplit_once('.').map(|(ns, _)| ns.to_string());
                let mut definition = value.clone();
                // Defined elsewhere, it keeps the namespace it had here.
                if let (Some(ns), Value::Object(d)) = (&inner, &mut definition) {
                    d.insert("namespace".into(), Value::String(ns.clone()));
                }
                known.entry(full).or_insert(definition);
                for field in obj.get("fields").and_then(Value::as_array).into_iter().flatten() {
                    if let Some(t) = field.get("type") {
                        collect_named(t, inner.as_deref(), known);
                    }
                }
            }
            for key in ["items", "values"] {
                if let Some(t) = obj.get(key) {
                    collect_named(t, own.as_deref(), known);
                }
            }
        }
        _ => {}
    }
}

fn inline(value: &mut Value, namespace: Option<&str>, known: &HashMap<String, Value>, defined: &mut HashSet<String>) {
    match value {
        Value::String(name) if !PRIMITIVES.contains(&name.as_str()) => {
            let full = full_name(name, namespace);
            let found = known
                .get(&full)
                .map(|d| (full.clone(), d))
                .or_else(|| known.get(name.as_str()).map(|d| (name.clone(), d)));
            if let Some((full, definition)) = found
                && defined.insert(full)
            {
                *value = definition.clone();
                // Where the namespace is the one it is used in, it is left implied, as it
                // would be written inline (arrow-avro compares names as they are written).
                if let Value::Object(d) = value
                    && d.get("namespace").and_then(Value::as_str) == namespace
                {
                    d.remove("namespace");
                }
                inline(value, namespace, known, defined);
            }
        }
        Value::Array(branches) => branches.iter_mut().for_each(|b| inline(b, namespace, known, defined)),
        Value::Object(obj) => {
            let own = obj.get("namespace").and_then(Value::as_str).or(namespace).map(str::to_string);
            let mut inner = own.clone();
            if let (Some(name), Some("record" | "enum" | "fixed")) =
                (obj.get("name").and_then(Value::as_str), obj.get("type").and_then(Value::as_str))
            {
                let full = full_name(name, own.as_deref());
                inner = full.rsplit_once('.').map(|(ns, _)| ns.to_string());
                defined.insert(full);
            }
            if let Some(Value::Array(fields)) = obj.get_mut("fields") {
                for field in fields {
                    if let Some(t) = field.get_mut("type") {
                        inline(t, inner.as_deref(), known, defined);
                    }
                }
            }
            for key in ["items", "values"] {
                if let Some(t) = obj.get_mut(key) {
                    inline(t, own.as_deref(), known, defined);
                }
            }
            if let Some(t) = obj.get_mut("type").filter(|t| {
                !t.is_string() || !matches!(t.as_str(), Some("record" | "enum" | "fixed" | "array" | "map"))
            }) {
                inline(t, own.as_deref(), known, defined);
            }
        }
        _ => {}
    }
}

const PRIMITIVES: &[&str] = &[
    "null", "boolean", "int", "long", "float", "double", "bytes", "string", "record", "enum", "fixed", "array", "map",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::avro_schema::AvroSchema;

    /// Referenced types are defined where first used (and what they use in
    /// turn), later uses stay names, and the result stands alone.
    #[test]
    fn schema_references_are_defined_where_first_used() {
        let point = r#"{"type":"record","name":"Point","namespace":"geo","fields":[{"name":"x","type":"double"}]}"#;
        let area = r#"{"type":"record","name":"Area","namespace":"geo","fields":[{"name":"corner","type":"Point"}]}"#;
        let main = r#"{"type":"record","name":"Site","namespace":"geo","fields":[
            {"name":"area","type":"Area"},{"name":"centre","type":"geo.Point"},{"name":"other","type":["null","Area"]}]}"#;
        let text = inline_references(main, &[area.to_string(), point.to_string()]).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["fields"][0]["type"]["name"], "Area");
        assert_eq!(value["fields"][0]["type"]["fields"][0]["type"]["name"], "Point");
        assert_eq!(value["fields"][1]["type"], "geo.Point", "defined already: a name");
        assert_eq!(value["fields"][2]["type"][1], "Area");
        assert_eq!(AvroSchema::parse(&text).unwrap().name(), "geo.Site");
    }
}
