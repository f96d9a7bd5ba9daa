//! Avro schemas as weir reads them: parsed from their JSON text, checked for
//! what weir can turn into columns, and compared by Avro's schema-resolution
//! rules (can a reader schema read what a writer schema wrote?), with errors
//! that name the field and both types.
//!
//! arrow-avro does the decoding and its own resolution; this module exists for
//! what it does not give: a schema weir cannot map is refused at registration
//! naming the construct, and an incompatible writer schema is explained in a
//! user's words ("field `geo.lat`: the writer's type is string, the declared
//! type is double") rather than as a parse error.
//!
//! One file, about 660 lines with its tests: parsing, the checks and the
//! resolution rules walk the same schema tree, case by case.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

/// A parsed Avro schema: its types, with named types kept once in `named`.
#[derive(Debug, Clone)]
pub struct AvroSchema {
    root: Node,
    named: Vec<Named>,
}

/// One type in a schema.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Null,
    Boolean,
    Int {
        logical: Option<String>,
    },
    Long {
        logical: Option<String>,
    },
    Float,
    Double,
    Bytes {
        logical: Option<String>,
    },
    String {
        logical: Option<String>,
    },
    Array(Box<Node>),
    Map(Box<Node>),
    Union(Vec<Node>),
    /// A record, enum or fixed: an index into `named`.
    Named(usize),
}

#[derive(Debug, Clone)]
struct Named {
    /// The full name (`namespace.name`).
    name: String,
    aliases: Vec<String>,
    kind: NamedKind,
}

#[derive(Debug, Clone)]
enum NamedKind {
    Record(Vec<RecordField>),
    Enum { symbols: Vec<String>, default: Option<String> },
    Fixed { size: usize, logical: Option<String> },
}

#[derive(Debug, Clone)]
struct RecordField {
    name: String,
    aliases: Vec<String>,
    node: Node,
    has_default: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AvroSchemaError {
    #[error("is not valid JSON: {0}")]
    Json(String),
    #[error("{0}")]
    Invalid(String),
    /// Valid Avro that weir cannot turn into table columns.
    #[error("{0}")]
    Unsupported(String),
}

/// Why a writer schema cannot be read with the declared one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct Incompatible {
    /// `field `geo.lat``, or `the record` at the top.
    pub path: String,
    pub reason: String,
}

impl AvroSchema {
    /// Parses a schema and checks it can be a table: a record at the top, no
    /// unions other than a type with `null`, no type that contains itself.
    pub fn parse(text: &str) -> Result<Self, AvroSchemaError> {
        let schema = Self::parse_any(text)?;
        let Node::Named(i) = schema.root else {
            return Err(AvroSchemaError::Unsupported(format!(
                "the top-level type is {}, not a record: a table's rows need a record with a field per column",
                schema.describe(&schema.root)
            )));
        };
        if !matches!(schema.named[i].kind, NamedKind::Record(_)) {
            return Err(AvroSchemaError::Unsupported(format!(
                "the top-level type is {}, not a record: a table's rows need a record with a field per column",
                schema.describe(&schema.root)
            )));
        }
        schema.check_mappable(&schema.root, "", &mut Vec::new())?;
        Ok(schema)
    }

    /// Parses any valid Avro schema (what a registry accepts).
    pub fn parse_any(text: &str) -> Result<Self, AvroSchemaError> {
        let value: Value = serde_json::from_str(text).map_err(|e| AvroSchemaError::Json(e.to_string()))?;
        let mut parser = Parser { named: Vec::new(), by_name: HashMap::new() };
        let root = parser.node(&value, None)?;
        Ok(Self { root, named: parser.named })
    }

    /// The top-level record's full name.
    pub fn name(&self) -> &str {
        match self.root {
            Node::Named(i) => &self.named[i].name,
            _ => "",
        }
    }

    fn check_mappable(&self, node: &Node, path: &str, open: &mut Vec<usize>) -> Result<(), AvroSchemaError> {
        let at = |path: &str| if path.is_empty() { "the record".to_string() } else { format!("field `{path}`") };
        match node {
            Node::Array(item) => self.check_mappable(item, &format!("{path}[]"), open),
            Node::Map(value) => self.check_mappable(value, &format!("{path}{{}}"), open),
            Node::Union(branches) => {
                let others: Vec<&Node> = branches.iter().filter(|b| **b != Node::Null).collect();
                if others.len() != 1 || branches.len() > 2 {
                    let names: Vec<String> = branches.iter().map(|b| self.describe(b)).collect();
                    return Err(AvroSchemaError::Unsupported(format!(
                        "{} is a union of [{}]: weir maps only a union of null and one other type (a nullable column); \
                         split the alternatives into fields of their own",
                        at(path),
                        names.join(", ")
                    )));
                }
                self.check_mappable(others[0], path, open)
            }
            Node::Named(i) => {
                if open.contains(i) {
                    return Err(AvroSchemaError::Unsupported(format!(
                        "{} refers back to record {}, which contains it: a recursive type has no fixed set of columns",
                        at(path),
                        self.named[*i].name
                    )));
                }
                if let NamedKind::Record(fields) = &self.named[*i].kind {
                    open.push(*i);
                    for f in fields {
                        let child = if path.is_empty() { f.name.clone() } else { format!("{path}.{}", f.name) };
                        self.check_mappable(&f.node, &child, open)?;
                    }
                    open.pop();
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// How a type is named in messages: `long`, `array<string>`, `record com.acme.Geo`, `["null", "string"]`.
    fn describe(&self, node: &Node) -> String {
        let logical = |base: &str, l: &Option<String>| match l {
            Some(l) => format!("{base} ({l})"),
            None => base.to_string(),
        };
        match node {
            Node::Null => "null".into(),
            Node::Boolean => "boolean".into(),
            Node::Int { logical: l } => logical("int", l),
            Node::Long { logical: l } => logical("long", l),
            Node::Float => "float".into(),
            Node::Double => "double".into(),
            Node::Bytes { logical: l } => logical("bytes", l),
            Node::String { logical: l } => logical("string", l),
            Node::Array(item) => format!("array<{}>", self.describe(item)),
            Node::Map(value) => format!("map<{}>", self.describe(value)),
            Node::Union(branches) => {
                let names: Vec<String> = branches.iter().map(|b| format!("\"{}\"", self.describe(b))).collect();
                format!("[{}]", names.join(", "))
            }
            Node::Named(i) => {
                let named = &self.named[*i];
                match &named.kind {
                    NamedKind::Record(_) => format!("record {}", named.name),
                    NamedKind::Enum { .. } => format!("enum {}", named.name),
                    NamedKind::Fixed { size, logical: l } => {
                        logical(&format!("fixed {} ({size} bytes)", named.name), l)
                    }
                }
            }
        }
    }

    /// Checks that data written with `writer` can be read with `self` (the
    /// declared schema), by the Avro specification's resolution rules: fields
    /// matched by name or alias, a declared field the writer lacks needs a
    /// default, numbers widen (int → long → float → double), string and bytes
    /// interchange, enum symbols the writer uses must be known (or the
    /// declared enum has a default), and every branch a writer's union may
    /// write must be readable.
    pub fn can_read(&self, writer: &AvroSchema) -> Result<(), Incompatible> {
        let mut seen = HashSet::new();
        Resolver { reader: self, writer, seen: &mut seen }.resolve(&writer.root, &self.root, "")
    }
}

struct Parser {
    named: Vec<Named>,
    by_name: HashMap<String, usize>,
}

/// The full name of a schema's top-level named type, read from its text alone.
pub fn top_name(text: &str) -> Option<String> {
    let value: Value = serde_json::from_str(text).ok()?;
    let name = value.get("name")?.as_str()?;
    Some(full_name(name, value.get("namespace").and_then(Value::as_str)))
}

pub(super) fn full_name(name: &str, namespace: Option<&str>) -> String {
    match namespace {
        _ if name.contains('.') => name.to_string(),
        Some(ns) if !ns.is_empty() => format!("{ns}.{name}"),
        _ => name.to_string(),
    }
}

fn strings(obj: &Map<String, Value>, key: &str) -> Vec<String> {
    obj.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default()
}

impl Parser {
    fn node(&mut self, value: &Value, namespace: Option<&str>) -> Result<Node, AvroSchemaError> {
        match value {
            Value::String(name) => self.by_type_name(name, namespace),
            Value::Array(branches) => {
                let nodes = branches.iter().map(|b| self.node(b, namespace)).collect::<Result<Vec<_>, _>>()?;
                Ok(Node::Union(nodes))
            }
            Value::Object(obj) => self.complex(obj, namespace),
            other => Err(AvroSchemaError::Invalid(format!(
                "{other} is not an Avro type: use a type name, an object or a union list"
            ))),
        }
    }

    fn by_type_name(&self, name: &str, namespace: Option<&str>) -> Result<Node, AvroSchemaError> {
        Ok(match name {
            "null" => Node::Null,
            "boolean" => Node::Boolean,
            "int" => Node::Int { logical: None },
            "long" => Node::Long { logical: None },
            "float" => Node::Float,
            "double" => Node::Double,
            "bytes" => Node::Bytes { logical: None },
            "string" => Node::String { logical: None },
            other => {
                let found = self.by_name.get(&full_name(other, namespace)).or_else(|| self.by_name.get(other));
                match found {
                    Some(i) => Node::Named(*i),
                    None => {
                        return Err(AvroSchemaError::Invalid(format!(
                            "unknown type `{other}`: name a primitive type, or a record, enum or fixed defined before this point"
                        )));
                    }
                }
            }
        })
    }

    fn complex(&mut self, obj: &Map<String, Value>, namespace: Option<&str>) -> Result<Node, AvroSchemaError> {
        let ty = obj.get("type").ok_or_else(|| AvroSchemaError::Invalid("a type object needs `type`".into()))?;
        let logical = obj.get("logicalType").and_then(Value::as_str).map(String::from);
        let ty = match ty {
            Value::String(t) => t.as_str(),
            // `{"type": {"type": "array", ...}}` and `{"type": ["null", ...]}` wrap a type.
            other => return self.node(other, namespace),
        };
        let named = |obj: &Map<String, Value>| -> Result<(String, Option<String>, Vec<String>), AvroSchemaError> {
            let name = obj
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| AvroSchemaError::Invalid(format!("a {ty} needs a `name`")))?;
            let ns = obj.get("namespace").and_then(Value::as_str).or(namespace);
            let full = full_name(name, ns);
            let own_ns = full.rsplit_once('.').map(|(ns, _)| ns.to_string());
            let aliases = strings(obj, "aliases").iter().map(|a| full_name(a, own_ns.as_deref())).collect();
            Ok((full, own_ns, aliases))
        };
        Ok(match ty {
            "record" | "error" => {
                let (name, own_ns, aliases) = named(obj)?;
                // Registered before its fields, so a field may refer to the record itself.
                let index = self.define(Named { name: name.clone(), aliases, kind: NamedKind::Record(vec![]) })?;
                let fields = obj
                    .get("fields")
                    .and_then(Value::as_array)
                    .ok_or_else(|| AvroSchemaError::Invalid(format!("record {name} needs a `fields` list")))?;
                let mut parsed = Vec::with_capacity(fields.len());
                let mut names = HashSet::new();
                for f in fields {
                    let f = f.as_object().ok_or_else(|| {
                        AvroSchemaError::Invalid(format!("a field of record {name} is not an object"))
                    })?;
                    let field_name = f
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| AvroSchemaError::Invalid(format!("a field of record {name} has no `name`")))?;
                    if !names.insert(field_name.to_string()) {
                        return Err(AvroSchemaError::Invalid(format!(
                            "record {name} has two fields named `{field_name}`"
                        )));
                    }
                    let ty = f.get("type").ok_or_else(|| {
                        AvroSchemaError::Invalid(format!("field `{field_name}` of record {name} has no `type`"))
                    })?;
                    parsed.push(RecordField {
                        name: field_name.to_string(),
                        aliases: strings(f, "aliases"),
                        node: self.node(ty, own_ns.as_deref())?,
                        has_default: f.contains_key("default"),
                    });
                }
                self.named[index].kind = NamedKind::Record(parsed);
                Node::Named(index)
            }
            "enum" => {
                let (name, _, aliases) = named(obj)?;
                let symbols = strings(obj, "symbols");
                if symbols.is_empty() {
                    return Err(AvroSchemaError::Invalid(format!("enum {name} needs a non-empty `symbols` list")));
                }
                let default = obj.get("default").and_then(Value::as_str).map(String::from);
                Node::Named(self.define(Named { name, aliases, kind: NamedKind::Enum { symbols, default } })?)
            }
            "fixed" => {
                let (name, _, aliases) = named(obj)?;
                let size = obj
                    .get("size")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| AvroSchemaError::Invalid(format!("fixed {name} needs a whole-number `size`")))?;
                Node::Named(self.define(Named {
                    name,
                    aliases,
                    kind: NamedKind::Fixed { size: size as usize, logical },
                })?)
            }
            "array" => {
                let items =
                    obj.get("items").ok_or_else(|| AvroSchemaError::Invalid("an array needs `items`".into()))?;
                Node::Array(Box::new(self.node(items, namespace)?))
            }
            "map" => {
                let values =
                    obj.get("values").ok_or_else(|| AvroSchemaError::Invalid("a map needs `values`".into()))?;
                Node::Map(Box::new(self.node(values, namespace)?))
            }
            primitive => match self.by_type_name(primitive, namespace)? {
                Node::Int { .. } => Node::Int { logical },
                Node::Long { .. } => Node::Long { logical },
                Node::Bytes { .. } => Node::Bytes { logical },
                Node::String { .. } => Node::String { logical },
                other => other,
            },
        })
    }

    fn define(&mut self, named: Named) -> Result<usize, AvroSchemaError> {
        if self.by_name.contains_key(&named.name) {
            return Err(AvroSchemaError::Invalid(format!("the name {} is defined twice", named.name)));
        }
        let index = self.named.len();
        self.by_name.insert(named.name.clone(), index);
        self.named.push(named);
        Ok(index)
    }
}

struct Resolver<'a> {
    reader: &'a AvroSchema,
    writer: &'a AvroSchema,
    /// Named pairs already being resolved (recursive types resolve once).
    seen: &'a mut HashSet<(usize, usize)>,
}

impl Resolver<'_> {
    fn mismatch(&self, path: &str, writer: &Node, reader: &Node) -> Incompatible {
        Incompatible {
            path: at(path),
            reason: format!(
                "the writer's type is {}, the declared type is {}",
                self.writer.describe(writer),
                self.reader.describe(reader)
            ),
        }
    }

    fn resolve(&mut self, writer: &Node, reader: &Node, path: &str) -> Result<(), Incompatible> {
        // A writer's union: every branch it may write must be readable.
        if let Node::Union(branches) = writer {
            for branch in branches {
                self.resolve(branch, reader, path).map_err(|e| {
                    if e.path != at(path) {
                        e
                    } else {
                        Incompatible {
                            path: e.path,
                            reason: format!(
                                "the writer's type is {}, the declared type is {}: the writer may write {}, which the declared type cannot hold",
                                self.writer.describe(writer),
                                self.reader.describe(reader),
                                self.writer.describe(branch)
                            ),
                        }
                    }
                })?;
            }
            return Ok(());
        }
        // A declared union: the first branch that can read the writer's type.
        if let Node::Union(branches) = reader {
            let mut first_error = None;
            for branch in branches {
                match self.resolve(writer, branch, path) {
                    Ok(()) => return Ok(()),
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            return Err(match first_error {
                Some(e) if e.path != at(path) => e,
                _ => self.mismatch(path, writer, reader),
            });
        }
        use Node::*;
        let ok = match (writer, reader) {
            (Null, Null) | (Boolean, Boolean) | (Float, Float) | (Double, Double) => true,
            (Int { logical: w }, Int { logical: r }) | (Long { logical: w }, Long { logical: r }) => {
                logical_agree(w, r)
            }
            (Bytes { logical: w }, Bytes { logical: r }) | (String { logical: w }, String { logical: r }) => {
                logical_agree(w, r)
            }
            (Int { logical: None }, Long { logical: None } | Float | Double) => true,
            (Long { logical: None }, Float | Double) | (Float, Double) => true,
            (String { logical: None }, Bytes { logical: None })
            | (Bytes { logical: None }, String { logical: None }) => true,
            (Array(w), Array(r)) => return self.resolve(w, r, &format!("{path}[]")),
            (Map(w), Map(r)) => return self.resolve(w, r, &format!("{path}{{}}")),
            (Named(w), Named(r)) => return self.named(*w, *r, writer, reader, path),
            _ => false,
        };
        if ok { Ok(()) } else { Err(self.mismatch(path, writer, reader)) }
    }

    fn named(&mut self, w: usize, r: usize, writer: &Node, reader: &Node, path: &str) -> Result<(), Incompatible> {
        let (wn, rn) = (&self.writer.named[w], &self.reader.named[r]);
        let same_kind = matches!(
            (&wn.kind, &rn.kind),
            (NamedKind::Record(_), NamedKind::Record(_))
                | (NamedKind::Enum { .. }, NamedKind::Enum { .. })
                | (NamedKind::Fixed { .. }, NamedKind::Fixed { .. })
        );
        if !same_kind {
            return Err(self.mismatch(path, writer, reader));
        }
        if !names_match(wn, rn) {
            return Err(Incompatible {
                path: at(path),
                reason: format!(
                    "the writer's {} is named {}, the declared one {}: Avro matches named types by name, so give the \
                     declared one the writer's name and namespace, or list {} in its `aliases`",
                    kind_word(&wn.kind),
                    wn.name,
                    rn.name,
                    wn.name
                ),
            });
        }
        if !self.seen.insert((w, r)) {
            return Ok(());
        }
        match (&wn.kind, &rn.kind) {
            (NamedKind::Record(wf), NamedKind::Record(rf)) => {
                for field in rf {
                    let child = if path.is_empty() { field.name.clone() } else { format!("{path}.{}", field.name) };
                    let written = wf.iter().find(|w| {
                        w.name == field.name || field.aliases.contains(&w.name) || w.aliases.contains(&field.name)
                    });
                    match written {
                        Some(w) => self.resolve(&w.node, &field.node, &child)?,
                        None if field.has_default => {}
                        None => {
                            return Err(Incompatible {
                                path: at(&child),
                                reason: format!(
                                    "the writer's record {} has no such field and the declared field has no default: \
                                     add a `default` to the declared field, or make it a union with null and default null",
                                    wn.name
                                ),
                            });
                        }
                    }
                }
                Ok(())
            }
            (NamedKind::Enum { symbols: ws, .. }, NamedKind::Enum { symbols: rs, default }) => {
                let unknown: Vec<&String> = ws.iter().filter(|s| !rs.contains(s)).collect();
                if unknown.is_empty() || default.is_some() {
                    Ok(())
                } else {
                    Err(Incompatible {
                        path: at(path),
                        reason: format!(
                            "the writer's enum {} has symbols the declared enum lacks ({}) and the declared enum has \
                             no default: add them, or a `default` symbol",
                            wn.name,
                            unknown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                        ),
                    })
                }
            }
            (NamedKind::Fixed { size: ws, logical: wl }, NamedKind::Fixed { size: rs, logical: rl }) => {
                if ws == rs && logical_agree(wl, rl) { Ok(()) } else { Err(self.mismatch(path, writer, reader)) }
            }
            _ => unreachable!("kinds checked above"),
        }
    }
}

fn at(path: &str) -> String {
    if path.is_empty() { "the record".to_string() } else { format!("field `{path}`") }
}

fn kind_word(kind: &NamedKind) -> &'static str {
    match kind {
        NamedKind::Record(_) => "record",
        NamedKind::Enum { .. } => "enum",
        NamedKind::Fixed { .. } => "fixed",
    }
}

/// Named types match by full name, or by an alias either way; unqualified
/// names also match (the Avro specification's rule for resolution).
fn names_match(writer: &Named, reader: &Named) -> bool {
    let short = |n: &str| n.rsplit('.').next().unwrap_or(n).to_string();
    let names = |n: &Named| {
        let mut all: HashSet<String> = n.aliases.iter().cloned().collect();
        all.insert(n.name.clone());
        all
    };
    let (w, r) = (names(writer), names(reader));
    !w.is_disjoint(&r) || short(&writer.name) == short(&reader.name)
}

/// Logical types must agree for the values to mean the same; a plain type
/// reads a logical one of the same base and back (as Avro itself does).
fn logical_agree(writer: &Option<String>, reader: &Option<String>) -> bool {
    match (writer, reader) {
        (Some(w), Some(r)) => w == r,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> AvroSchema {
        AvroSchema::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    const V1: &str = r#"{"type":"record","name":"Click","namespace":"weir","fields":[
        {"name":"id","type":"string"},
        {"name":"user_id","type":"int"},
        {"name":"ref","type":["null","string"],"default":null},
        {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B"]}},
        {"name":"geo","type":{"type":"record","name":"Geo","fields":[{"name":"lat","type":"double"}]}}
    ]}"#;

    #[test]
    fn resolution_follows_the_avro_rules() {
        let v1 = parse(V1);
        assert_eq!(v1.name(), "weir.Click");
        assert_eq!(v1.can_read(&v1), Ok(()));
        // Declared: int widened to long, a new field with a default, `ref` dropped.
        let declared = parse(
            r#"{"type":"record","name":"Click","namespace":"weir","fields":[
            {"name":"id","type":"string"},
            {"name":"user_id","type":"long"},
            {"name":"country","type":"string","default":"DE"},
            {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B","C"]}},
            {"name":"geo","type":{"type":"record","name":"Geo","fields":[{"name":"lat","type":"double"}]}}
        ]}"#,
        );
        assert_eq!(declared.can_read(&v1), Ok(()));
        // The other way round, long does not narrow to int.
        assert_eq!(
            v1.can_read(&declared).unwrap_err().to_string(),
            "field `user_id`: the writer's type is long, the declared type is int"
        );
    }

    #[test]
    fn each_incompatibility_names_the_field_and_both_types() {
        let v1 = parse(V1);
        let cases = [
            (
                V1.replace(r#"{"name":"lat","type":"double"}"#, r#"{"name":"lat","type":"string"}"#),
                "field `geo.lat`: the writer's type is string, the declared type is double",
            ),
            (
                V1.replace(r#"{"name":"id","type":"string"},"#, ""),
                "field `id`: the writer's record weir.Click has no such field and the declared field has no default",
            ),
            (
                V1.replace(r#""symbols":["A","B"]"#, r#""symbols":["A","B","Z"]"#),
                "field `kind`: the writer's enum weir.Kind has symbols the declared enum lacks (Z)",
            ),
            (
                V1.replace(r#""type":["null","string"]"#, r#""type":["null","long"]"#),
                "field `ref`: the writer's type is [\"null\", \"long\"], the declared type is [\"null\", \"string\"]",
            ),
            (V1.replace(r#""name":"Click""#, r#""name":"Tap""#), "the record: the writer's record is named weir.Tap"),
        ];
        for (writer, expected) in cases {
            let err = v1.can_read(&parse(&writer)).unwrap_err().to_string();
            assert!(err.starts_with(expected), "{err}\nexpected: {expected}");
        }
        // A nullable writer field cannot fill a required declared one: the null has nowhere to go.
        let nullable_id = V1.replace(r#"{"name":"id","type":"string"}"#, r#"{"name":"id","type":["null","string"]}"#);
        let err = v1.can_read(&parse(&nullable_id)).unwrap_err().to_string();
        assert!(err.contains("the writer may write null"), "{err}");
    }

    #[test]
    fn what_cannot_be_a_table_is_refused_naming_the_construct() {
        let cases = [
            (r#""string""#, "the top-level type is string, not a record"),
            (
                r#"{"type":"record","name":"R","fields":[{"name":"v","type":["string","long"]}]}"#,
                "field `v` is a union of [string, long]: weir maps only a union of null and one other type",
            ),
            (
                r#"{"type":"record","name":"Node","fields":[{"name":"next","type":["null","Node"]}]}"#,
                "field `next` refers back to record Node, which contains it",
            ),
            (r#"{"type":"record","name":"R","fields":[{"name":"v","type":"Missing"}]}"#, "unknown type `Missing`"),
            (r#"{"type":"record","name":"R"}"#, "record R needs a `fields` list"),
            ("{", "is not valid JSON"),
        ];
        for (text, expected) in cases {
            let err = AvroSchema::parse(text).unwrap_err().to_string();
            assert!(err.starts_with(expected), "{text}\n→ {err}\nexpected: {expected}");
        }
    }
}
