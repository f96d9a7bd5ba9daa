//! Table schemas declared as JSON Schema documents (what a user points to as
//! `clicks.json`), resolved into Arrow schemas.
//!
//! | JSON Schema                                | Arrow                          |
//! |--------------------------------------------|--------------------------------|
//! | `integer`                                  | `Int64`                        |
//! | `number`                                   | `Float64`                      |
//! | `string`                                   | `Utf8`                         |
//! | `string` + `format: date-time`             | `Timestamp(µs, "+00:00")`      |
//! | `string` + `format: date`                  | `Date32`                       |
//! | `boolean`                                  | `Boolean`                      |
//! | `object` + `properties`                    | `Struct`                       |
//! | `array` + `items`                          | `List`                         |
//!
//! A property listed in `required` is non-nullable unless its `type` also
//! admits `"null"`; every other property is nullable. Top-level property order
//! is column order.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, Schema, TimeUnit};
use serde_json::{Map, Value};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SchemaError {
    #[error("the schema is not valid JSON: {0}")]
    Json(String),
    #[error("the schema must be a JSON object with `\"type\": \"object\"` and `properties` at the top level")]
    NotAnObject,
    #[error("property `{path}`: {reason}")]
    Property { path: String, reason: String },
}

/// Parses a JSON Schema document into an Arrow schema.
/// A JSON Schema's `title`, if it has one.
pub fn title(text: &str) -> Option<String> {
    let doc: Value = serde_json::from_str(text).ok()?;
    doc.get("title")?.as_str().map(str::to_string)
}

pub fn from_json_schema(text: &str) -> Result<Schema, SchemaError> {
    let doc: Value = serde_json::from_str(text).map_err(|e| SchemaError::Json(e.to_string()))?;
    let obj = doc.as_object().ok_or(SchemaError::NotAnObject)?;
    if obj.get("type").and_then(Value::as_str) != Some("object") || !obj.contains_key("properties") {
        return Err(SchemaError::NotAnObject);
    }
    Ok(Schema::new(object_fields(obj, "")?))
}

fn object_fields(obj: &Map<String, Value>, prefix: &str) -> Result<Fields, SchemaError> {
    let path_of = |name: &str| if prefix.is_empty() { name.to_string() } else { format!("{prefix}.{name}") };
    let props = obj.get("properties").and_then(Value::as_object).ok_or_else(|| SchemaError::Property {
        path: prefix.to_string(),
        reason: "`properties` must be an object".into(),
    })?;
    let required: Vec<&str> = match obj.get("required") {
        None => vec![],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        Some(_) => {
            return Err(SchemaError::Property {
                path: prefix.to_string(),
                reason: "`required` must be a list of property names".into(),
            });
        }
    };
    if let Some(missing) = required.iter().find(|r| !props.contains_key(**r)) {
        return Err(SchemaError::Property {
            path: path_of(missing),
            reason: "listed in `required` but not in `properties`".into(),
        });
    }
    props
        .iter()
        .map(|(name, prop)| {
            let path = path_of(name);
            let (data_type, admits_null) = property_type(prop, &path)?;
            let nullable = admits_null || !required.contains(&name.as_str());
            Ok(Field::new(name, data_type, nullable))
        })
        .collect()
}

/// The Arrow type of one property, and whether its `type` admits `null`.
fn property_type(prop: &Value, path: &str) -> Result<(DataType, bool), SchemaError> {
    let err = |reason: &str| SchemaError::Property { path: path.to_string(), reason: reason.to_string() };
    let obj = prop.as_object().ok_or_else(|| err("must be an object with a `type`"))?;
    let (ty, admits_null) = match obj.get("type") {
        Some(Value::String(t)) => (t.as_str(), false),
        Some(Value::Array(types)) => {
            let names: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
            let non_null: Vec<&str> = names.iter().copied().filter(|t| *t != "null").collect();
            match non_null.as_slice() {
                [t] => (*t, names.contains(&"null")),
                _ => return Err(err("a `type` list must name exactly one type besides \"null\"")),
            }
        }
        _ => return Err(err("has no `type`")),
    };
    let data_type = match ty {
        "integer" => DataType::Int64,
        "number" => DataType::Float64,
        "boolean" => DataType::Boolean,
        "string" => match obj.get("format").and_then(Value::as_str) {
            Some("date-time") => DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
            Some("date") => DataType::Date32,
            _ => DataType::Utf8,
        },
        "object" => DataType::Struct(object_fields(obj, path).map_err(|e| match e {
            SchemaError::Property { path: p, reason } if p == path => SchemaError::Property {
                path: p,
                reason: format!("{reason} (an `object` property needs its own `properties`)"),
            },
            other => other,
        })?),
        "array" => {
            let items = obj.get("items").ok_or_else(|| err("an `array` needs `items`"))?;
            let (item_type, _) = property_type(items, &format!("{path}[]"))?;
            DataType::List(Arc::new(Field::new("item", item_type, true)))
        }
        other => {
            return Err(err(&format!(
                "unsupported type {other:?}; use integer, number, string, boolean, object or array"
            )));
        }
    };
    Ok((data_type, admits_null))
}

/// Checks that values written under the `writer` schema (a registry's) can be
/// read with the `declared` one: every property the declared schema requires
/// is required by the writer's too, and properties both have agree in type
/// (an integer may be read as a number).
pub fn check_compatible(writer: &Schema, declared: &Schema) -> Result<(), String> {
    fields_compatible(writer.fields(), declared.fields(), "")
}

fn fields_compatible(writer: &Fields, declared: &Fields, prefix: &str) -> Result<(), String> {
    for d in declared {
        let path = if prefix.is_empty() { d.name().clone() } else { format!("{prefix}.{}", d.name()) };
        let Some(w) = writer.iter().find(|w| w.name() == d.name()) else {
            if !d.is_nullable() {
                return Err(format!(
                    "property `{path}`: the declared schema requires it, and the writer's schema does not have it"
                ));
            }
            continue;
        };
        if !d.is_nullable() && w.is_nullable() {
            return Err(format!(
                "property `{path}`: the declared schema requires it, but the writer's does not, so it may be missing or null"
            ));
        }
        types_compatible(w.data_type(), d.data_type(), &path)?;
    }
    Ok(())
}

fn types_compatible(writer: &DataType, declared: &DataType, path: &str) -> Result<(), String> {
    match (writer, declared) {
        (DataType::Struct(w), DataType::Struct(d)) => fields_compatible(w, d, path),
        (DataType::List(w), DataType::List(d)) => types_compatible(w.data_type(), d.data_type(), &format!("{path}[]")),
        (w, d) if w == d => Ok(()),
        (DataType::Int64, DataType::Float64) => Ok(()),
        (w, d) => Err(format!(
            "property `{path}`: the writer's type is {}, the declared type is {}",
            type_word(w),
            type_word(d)
        )),
    }
}

/// A type in JSON Schema's words.
fn type_word(data_type: &DataType) -> String {
    match data_type {
        DataType::Int64 => "integer".into(),
        DataType::Float64 => "number".into(),
        DataType::Boolean => "boolean".into(),
        DataType::Utf8 => "string".into(),
        DataType::Timestamp(..) => "string (date-time)".into(),
        DataType::Date32 => "string (date)".into(),
        DataType::Struct(_) => "object".into(),
        DataType::List(item) => format!("array of {}", type_word(item.data_type())),
        other => other.to_string(),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Every type and nullability; the JSON decoder's tests read values of it too.
    pub(in crate::formats) const EVERY_TYPE: &str = r#"{"type":"object","required":["id","ts","tags"],"properties":{
        "id":{"type":"integer"},
        "score":{"type":"number"},
        "ts":{"type":"string","format":"date-time"},
        "day":{"type":"string","format":"date"},
        "ok":{"type":"boolean"},
        "ref":{"type":["string","null"]},
        "tags":{"type":"array","items":{"type":"string"}},
        "geo":{"type":"object","required":["lat"],"properties":{"lat":{"type":"number"},"lon":{"type":"number"}}},
        "hops":{"type":"array","items":{"type":"object","properties":{"at":{"type":"integer"},"via":{"type":"array","items":{"type":"integer"}}}}}
    }}"#;

    #[test]
    fn maps_every_type_and_nullability() {
        let schema = from_json_schema(EVERY_TYPE).unwrap();
        let shown: Vec<String> =
            schema.fields().iter().map(|f| format!("{}:{}:{}", f.name(), f.data_type(), f.is_nullable())).collect();
        assert_eq!(
            shown,
            [
                "id:Int64:false",
                "score:Float64:true",
                "ts:Timestamp(µs, \"+00:00\"):false",
                "day:Date32:true",
                "ok:Boolean:true",
                "ref:Utf8:true",
                "tags:List(Utf8):false",
                "geo:Struct(\"lat\": non-null Float64, \"lon\": Float64):true",
                "hops:List(Struct(\"at\": Int64, \"via\": List(Int64))):true",
            ]
        );
    }

    #[test]
    fn errors_name_the_property() {
        let cases = [
            ("not json", "the schema is not valid JSON: expected ident at line 1 column 2"),
            (
                r#"{"type":"array"}"#,
                "the schema must be a JSON object with `\"type\": \"object\"` and `properties` at the top level",
            ),
            (
                r#"{"type":"object","properties":{"a":{"type":"decimal"}}}"#,
                "property `a`: unsupported type \"decimal\"; use integer, number, string, boolean, object or array",
            ),
            (r#"{"type":"object","properties":{"a":{}}}"#, "property `a`: has no `type`"),
            (
                r#"{"type":"object","required":["b"],"properties":{"a":{"type":"string"}}}"#,
                "property `b`: listed in `required` but not in `properties`",
            ),
            (r#"{"type":"object","properties":{"a":{"type":"array"}}}"#, "property `a`: an `array` needs `items`"),
            (
                r#"{"type":"object","properties":{"a":{"type":"object"}}}"#,
                "property `a`: `properties` must be an object (an `object` property needs its own `properties`)",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(from_json_schema(input).unwrap_err().to_string(), expected, "{input}");
        }
    }

    #[test]
    fn a_writer_schema_is_compatible_when_it_gives_what_the_declared_one_requires() {
        let declared = from_json_schema(
            r#"{"type":"object","required":["id"],"properties":{"id":{"type":"integer"},"score":{"type":"number"},"geo":{"type":"object","properties":{"lat":{"type":"number"}}}}}"#,
        )
        .unwrap();
        let writer = |props: &str, required: &str| {
            from_json_schema(&format!(r#"{{"type":"object","required":[{required}],"properties":{{{props}}}}}"#))
                .unwrap()
        };
        let ok = writer(r#""id":{"type":"integer"},"score":{"type":"integer"},"extra":{"type":"string"}"#, r#""id""#);
        assert_eq!(check_compatible(&ok, &declared), Ok(()), "integers read as numbers; extra properties are ignored");
        let cases = [
            (
                writer(r#""score":{"type":"number"}"#, ""),
                "property `id`: the declared schema requires it, and the writer's schema does not have it",
            ),
            (
                writer(r#""id":{"type":"integer"}"#, ""),
                "property `id`: the declared schema requires it, but the writer's does not, so it may be missing or null",
            ),
            (
                writer(r#""id":{"type":"string"}"#, r#""id""#),
                "property `id`: the writer's type is string, the declared type is integer",
            ),
            (
                writer(
                    r#""id":{"type":"integer"},"geo":{"type":"object","properties":{"lat":{"type":"string"}}}"#,
                    r#""id""#,
                ),
                "property `geo.lat`: the writer's type is string, the declared type is number",
            ),
        ];
        for (w, expected) in cases {
            assert_eq!(check_compatible(&w, &declared).unwrap_err(), expected);
        }
    }
}
