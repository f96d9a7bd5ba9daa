//! Protobuf messages to Arrow rows: `.proto` source compiled in-process
//! (protox), and each message read off the wire straight into column builders
//! planned from the declared message's descriptor (`columns`, `wire`).
//!
//! | Protobuf                                         | Arrow                                   |
//! |--------------------------------------------------|-----------------------------------------|
//! | `int32` `sint32` `sfixed32`                      | `Int32`                                 |
//! | `int64` `sint64` `sfixed64`                      | `Int64`                                 |
//! | `uint32` `fixed32` / `uint64` `fixed64`          | `UInt32` / `UInt64`                     |
//! | `float` / `double` / `bool`                      | `Float32` / `Float64` / `Boolean`       |
//! | `string` / `bytes`                               | `Utf8` / `Binary`                       |
//! | enum                                             | `Dictionary(Int32, Utf8)` of value names |
//! | message                                          | `Struct`                                |
//! | `repeated T`                                     | `List<T>`                               |
//! | `map<K, V>`                                      | `Map<K, V>`                             |
//! | `oneof` members                                  | a nullable column each                  |
//! | `google.protobuf.Timestamp`                      | `Timestamp(µs, "+00:00")`               |
//! | `google.protobuf.Duration`                       | `Duration(µs)`                          |
//! | `google.protobuf.*Value` wrappers                | the wrapped type, nullable              |
//! | `google.protobuf.Struct`, `Value`, `ListValue`   | `Utf8`, as JSON                         |
//!
//! A field with presence (a message, `optional`, a oneof member, proto2
//! `optional`) is nullable; a proto3 scalar without it holds its default when
//! unset, as Protobuf itself reads it. A message that contains itself has no
//! fixed set of columns and is refused when the schema is declared.

pub mod columns;
mod wire;

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use prost_reflect::{DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor};
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

/// The name the declared schema's source is compiled under.
const DECLARED_FILE: &str = "declared.proto";

/// A `.proto` file for the compiler: source text, or a descriptor already compiled
/// (what a schema registry serves as `format=serialized`).
#[derive(Debug, Clone)]
pub enum ProtoFile {
    Source(String),
    Descriptor(Vec<u8>),
}

impl ProtoFile {
    /// A registry's Protobuf schema: a serialized descriptor (base64) when
    /// asked for with `format=serialized`, else `.proto` text.
    pub fn registered(schema: &str) -> Self {
        use base64::prelude::{BASE64_STANDARD, Engine as _};
        match BASE64_STANDARD.decode(schema.trim()) {
            Ok(bytes) if !schema.contains(' ') => Self::Descriptor(bytes),
            _ => Self::Source(schema.to_string()),
        }
    }
}

struct Files(HashMap<String, ProtoFile>);

impl FileResolver for Files {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match self.0.get(name) {
            Some(ProtoFile::Source(text)) => File::from_source(name, text),
            Some(ProtoFile::Descriptor(bytes)) => {
                let mut file = File::decode_file_descriptor_proto(bytes.as_slice()).map_err(|e| {
                    protox::Error::new(format!("the serialized descriptor of {name} does not decode: {e}"))
                })?;
                // A registry's descriptor carries its own name; imports know it by the reference's.
                if file.file_descriptor_proto().name() != name {
                    let mut proto = file.file_descriptor_proto().clone();
                    proto.name = Some(name.to_string());
                    file = File::from_file_descriptor_proto(proto);
                }
                Ok(file)
            }
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

/// Compiles `main` with `imports` (and the well-known `google/protobuf/*` files).
pub fn compile(main: &str, files: HashMap<String, ProtoFile>) -> Result<DescriptorPool, String> {
    let mut resolver = ChainFileResolver::new();
    resolver.add(Files(files));
    resolver.add(GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler.include_imports(true);
    compiler.open_file(main).map_err(|e| e.to_string())?;
    Ok(compiler.descriptor_pool())
}

/// The declared message, compiled.
#[derive(Debug, Clone)]
pub struct Declared {
    pub message: MessageDescriptor,
    /// The message's columns.
    pub arrow: SchemaRef,
}

impl Declared {
    /// Compiles `source` and finds `message` in it (by full name, or by its
    /// name when that is unique); refuses what cannot be a table.
    pub fn parse(source: &str, message: &str) -> Result<Self, String> {
        let pool = compile(DECLARED_FILE, HashMap::from([(DECLARED_FILE.into(), ProtoFile::Source(source.into()))]))
            .map_err(|e| format!("does not compile: {e}"))?;
        let defined: Vec<MessageDescriptor> =
            pool.all_messages().filter(|m| m.parent_file().name() == DECLARED_FILE && !m.is_map_entry()).collect();
        let found = match defined.iter().find(|m| m.full_name() == message) {
            Some(m) => Some(m.clone()),
            None => {
                let by_name: Vec<&MessageDescriptor> = defined.iter().filter(|m| m.name() == message).collect();
                (by_name.len() == 1).then(|| by_name[0].clone())
            }
        };
        let Some(message_descriptor) = found else {
            let names: Vec<&str> = defined.iter().map(|m| m.full_name()).collect();
            return Err(format!(
                "defines no message `{message}`; it defines: {}",
                if names.is_empty() { "no messages".to_string() } else { names.join(", ") }
            ));
        };
        let arrow = Arc::new(Schema::new(message_fields(&message_descriptor, "", &mut Vec::new())?));
        Ok(Self { message: message_descriptor, arrow })
    }
}

/// The message a registry frame's index path points at in `file`'s top-level messages.
pub fn message_at(pool: &DescriptorPool, file: &str, indexes: &[i32]) -> Option<MessageDescriptor> {
    let file = pool.get_file_by_name(file)?;
    let (&first, rest) = indexes.split_first()?;
    let mut message = file.messages().nth(usize::try_from(first).ok()?)?;
    for &i in rest {
        let child = message.child_messages().nth(usize::try_from(i).ok()?)?;
        message = child;
    }
    Some(message)
}

/// The message a Glue frame's index points at: every message of `file`,
/// nested ones included, sorted by full name (as Glue's serializers number them).
pub fn message_by_glue_index(pool: &DescriptorPool, file: &str, index: i32) -> Option<MessageDescriptor> {
    let mut messages: Vec<MessageDescriptor> = pool.all_messages().filter(|m| m.parent_file().name() == file).collect();
    messages.sort_by(|a, b| a.full_name().cmp(b.full_name()));
    messages.into_iter().nth(usize::try_from(index).ok()?)
}

fn child_path(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_string() } else { format!("{path}.{name}") }
}

fn message_fields(message: &MessageDescriptor, path: &str, open: &mut Vec<String>) -> Result<Fields, String> {
    if open.iter().any(|m| m == message.full_name()) {
        return Err(format!(
            "field `{path}` refers back to message {}, which contains it: a recursive message has no fixed set of columns",
            message.full_name()
        ));
    }
    open.push(message.full_name().to_string());
    let fields = message
        .fields()
        .map(|f| {
            let child = child_path(path, f.name());
            let nullable = (f.supports_presence() && !f.is_list()) || wrapper(&f.kind()).is_some();
            Ok(Field::new(f.name(), field_type(&f, &child, open)?, nullable))
        })
        .collect::<Result<Fields, String>>();
    open.pop();
    fields
}

fn field_type(field: &FieldDescriptor, path: &str, open: &mut Vec<String>) -> Result<DataType, String> {
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else { unreachable!("a map field's kind is its entry message") };
        let (k, v) = (entry.map_entry_key_field(), entry.map_entry_value_field());
        let entries = Fields::from(vec![
            Field::new("key", kind_type(&k.kind(), path, open)?, false),
            Field::new("value", kind_type(&v.kind(), &format!("{path}{{}}"), open)?, wrapper(&v.kind()).is_some()),
        ]);
        return Ok(DataType::Map(Arc::new(Field::new("entries", DataType::Struct(entries), false)), false));
    }
    let item = kind_type(&field.kind(), path, open)?;
    if field.is_list() {
        return Ok(DataType::List(Arc::new(Field::new("item", item, wrapper(&field.kind()).is_some()))));
    }
    Ok(item)
}

/// Well-known messages that map to a single column.
enum WellKnown {
    Timestamp,
    Duration,
    Json,
}

fn well_known(kind: &Kind) -> Option<WellKnown> {
    let Kind::Message(m) = kind else { return None };
    match m.full_name() {
        "google.protobuf.Timestamp" => Some(WellKnown::Timestamp),
        "google.protobuf.Duration" => Some(WellKnown::Duration),
        "google.protobuf.Struct" | "google.protobuf.Value" | "google.protobuf.ListValue" => Some(WellKnown::Json),
        _ => None,
    }
}

/// A `google.protobuf.*Value` wrapper's `value` field.
fn wrapper(kind: &Kind) -> Option<FieldDescriptor> {
    let Kind::Message(m) = kind else { return None };
    let wrapped = matches!(
        m.full_name(),
        "google.protobuf.DoubleValue"
            | "google.protobuf.FloatValue"
            | "google.protobuf.Int64Value"
            | "google.protobuf.UInt64Value"
            | "google.protobuf.Int32Value"
            | "google.protobuf.UInt32Value"
            | "google.protobuf.BoolValue"
            | "google.protobuf.StringValue"
            | "google.protobuf.BytesValue"
    );
    if wrapped { m.get_field(1) } else { None }
}

fn kind_type(kind: &Kind, path: &str, open: &mut Vec<String>) -> Result<DataType, String> {
    if let Some(value) = wrapper(kind) {
        return kind_type(&value.kind(), path, open);
    }
    Ok(match kind {
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => DataType::Int32,
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => DataType::Int64,
        Kind::Uint32 | Kind::Fixed32 => DataType::UInt32,
        Kind::Uint64 | Kind::Fixed64 => DataType::UInt64,
        Kind::Float => DataType::Float32,
        Kind::Double => DataType::Float64,
        Kind::Bool => DataType::Boolean,
        Kind::String => DataType::Utf8,
        Kind::Bytes => DataType::Binary,
        Kind::Enum(_) => DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
        Kind::Message(m) => match well_known(kind) {
            Some(WellKnown::Timestamp) => DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
            Some(WellKnown::Duration) => DataType::Duration(TimeUnit::Microsecond),
            Some(WellKnown::Json) => DataType::Utf8,
            None => DataType::Struct(message_fields(m, path, open)?),
        },
    })
}

/// Why a writer's message cannot be read with the declared one: a field
/// number both use with types that do not share a wire encoding, or one
/// repeated where the other is not.
pub fn check_compatible(writer: &MessageDescriptor, declared: &MessageDescriptor) -> Result<(), String> {
    compatible(writer, declared, "", &mut Vec::new())
}

fn compatible(
    writer: &MessageDescriptor,
    declared: &MessageDescriptor,
    path: &str,
    seen: &mut Vec<(String, String)>,
) -> Result<(), String> {
    let pair = (writer.full_name().to_string(), declared.full_name().to_string());
    if seen.contains(&pair) {
        return Ok(());
    }
    seen.push(pair);
    for d in declared.fields() {
        let Some(w) = writer.get_field(d.number()) else { continue };
        let child = child_path(path, d.name());
        let shape = |f: &FieldDescriptor| {
            if f.is_map() {
                "map"
            } else if f.is_list() {
                "repeated"
            } else {
                "singular"
            }
        };
        if shape(&w) != shape(&d) {
            return Err(format!(
                "field `{child}` (number {}): the writer's field is {} {}, the declared one {} {}",
                d.number(),
                shape(&w),
                kind_name(&w.kind()),
                shape(&d),
                kind_name(&d.kind())
            ));
        }
        let (wk, dk) = if d.is_map() {
            let (Kind::Message(we), Kind::Message(de)) = (w.kind(), d.kind()) else { unreachable!("map entries") };
            let (wkey, dkey) = (we.map_entry_key_field().kind(), de.map_entry_key_field().kind());
            if !same_wire(&wkey, &dkey) {
                return Err(mismatch(&format!("{child} (map key)"), d.number(), &wkey, &dkey));
            }
            (we.map_entry_value_field().kind(), de.map_entry_value_field().kind())
        } else {
            (w.kind(), d.kind())
        };
        match (&wk, &dk) {
            (Kind::Message(wm), Kind::Message(dm)) => {
                if well_known(&wk).is_some()
                    || wrapper(&wk).is_some()
                    || well_known(&dk).is_some()
                    || wrapper(&dk).is_some()
                {
                    if wm.full_name() != dm.full_name() {
                        return Err(mismatch(&child, d.number(), &wk, &dk));
                    }
                } else {
                    compatible(wm, dm, &child, seen)?;
                }
            }
            _ if same_wire(&wk, &dk) => {}
            _ => return Err(mismatch(&child, d.number(), &wk, &dk)),
        }
    }
    Ok(())
}

fn mismatch(path: &str, number: u32, writer: &Kind, declared: &Kind) -> String {
    format!(
        "field `{path}` (number {number}): the writer's type is {}, the declared type is {}",
        kind_name(writer),
        kind_name(declared)
    )
}

/// Types whose values read back as each other: the groups the Protobuf
/// language guide calls compatible.
fn same_wire(a: &Kind, b: &Kind) -> bool {
    let group = |k: &Kind| match k {
        Kind::Int32 | Kind::Uint32 | Kind::Int64 | Kind::Uint64 | Kind::Bool | Kind::Enum(_) => 1,
        Kind::Sint32 | Kind::Sint64 => 2,
        Kind::Fixed32 | Kind::Sfixed32 => 3,
        Kind::Fixed64 | Kind::Sfixed64 => 4,
        Kind::String | Kind::Bytes => 5,
        Kind::Float => 6,
        Kind::Double => 7,
        Kind::Message(_) => 8,
    };
    group(a) == group(b)
}

fn kind_name(kind: &Kind) -> String {
    match kind {
        Kind::Message(m) => format!("message {}", m.full_name()),
        Kind::Enum(e) => format!("enum {}", e.full_name()),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// Encodes a JSON object (Protobuf's JSON mapping) as a `message`. For
/// producers: the demo, the tests and the benchmark.
pub fn encode_json(message: &MessageDescriptor, json: &str) -> Result<Vec<u8>, String> {
    use prost_reflect::prost::Message as _;
    let mut deserializer = serde_json::Deserializer::from_str(json);
    let decoded = DynamicMessage::deserialize(message.clone(), &mut deserializer).map_err(|e| e.to_string())?;
    Ok(decoded.encode_to_vec())
}

/// Where `message` is in its file: the registry framing's message-index path.
pub fn index_path(message: &MessageDescriptor) -> Vec<i32> {
    let mut path = Vec::new();
    let mut current = message.clone();
    loop {
        match current.parent_message() {
            Some(parent) => {
                path.push(
                    parent.child_messages().position(|m| m.full_name() == current.full_name()).unwrap_or(0) as i32
                );
                current = parent;
            }
            None => {
                let file = current.parent_file();
                path.push(file.messages().position(|m| m.full_name() == current.full_name()).unwrap_or(0) as i32);
                break;
            }
        }
    }
    path.reverse();
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLICK: &str = r#"
        syntax = "proto3";
        package weir.test;
        import "google/protobuf/timestamp.proto";
        import "google/protobuf/wrappers.proto";
        message Geo { double lat = 1; double lon = 2; }
        enum Device { DEVICE_UNKNOWN = 0; DESKTOP = 1; MOBILE = 2; }
        message Click {
          string event_id = 1;
          int64 user_id = 2;
          google.protobuf.Timestamp ts = 3;
          optional string referrer = 4;
          Device device = 5;
          repeated string tags = 6;
          map<string, int64> counters = 7;
          Geo geo = 8;
          google.protobuf.Int64Value duration_ms = 9;
          oneof target { string url = 10; int32 button = 11; }
        }
    "#;

    #[test]
    fn every_construct_maps_to_a_column_type() {
        let declared = Declared::parse(CLICK, "weir.test.Click").unwrap();
        let shown: Vec<String> = declared
            .arrow
            .fields()
            .iter()
            .map(|f| format!("{}:{}:{}", f.name(), f.data_type(), f.is_nullable()))
            .collect();
        assert_eq!(
            shown,
            [
                "event_id:Utf8:false",
                "user_id:Int64:false",
                "ts:Timestamp(µs, \"+00:00\"):true",
                "referrer:Utf8:true",
                "device:Dictionary(Int32, Utf8):false",
                "tags:List(non-null Utf8):false",
                "counters:Map(\"entries\": non-null Struct(\"key\": non-null Utf8, \"value\": non-null Int64), unsorted):false",
                "geo:Struct(\"lat\": non-null Float64, \"lon\": non-null Float64):true",
                "duration_ms:Int64:true",
                "url:Utf8:true",
                "button:Int32:true",
            ]
        );
        // Found by its name alone too, when that is unique.
        assert_eq!(Declared::parse(CLICK, "Click").unwrap().message.full_name(), "weir.test.Click");
    }

    #[test]
    fn declaration_errors_say_what_is_wrong() {
        let err = Declared::parse(CLICK, "Tap").unwrap_err();
        assert_eq!(err, "defines no message `Tap`; it defines: weir.test.Geo, weir.test.Click");
        let err = Declared::parse("syntax = \"proto3\"; message A { strin x = 1; }", "A").unwrap_err();
        assert!(err.starts_with("does not compile: "), "{err}");
        let err = Declared::parse("syntax = \"proto3\"; message N { N next = 1; }", "N").unwrap_err();
        assert!(err.contains("field `next` refers back to message N"), "{err}");
    }

    #[test]
    fn compatibility_is_by_field_number_and_wire_type() {
        let declared = Declared::parse(CLICK, "Click").unwrap().message;
        let same = Declared::parse(CLICK, "Click").unwrap().message;
        assert_eq!(check_compatible(&same, &declared), Ok(()));
        let renamed_and_widened = CLICK.replace("int64 user_id = 2;", "int32 uid = 2;").replace("double lat = 1;", "");
        let w = Declared::parse(&renamed_and_widened, "Click").unwrap().message;
        assert_eq!(
            check_compatible(&w, &declared),
            Ok(()),
            "names do not matter, varints widen, missing fields are defaults"
        );
        let conflicting = CLICK.replace("double lat = 1;", "string lat = 1;");
        let w = Declared::parse(&conflicting, "Click").unwrap().message;
        assert_eq!(
            check_compatible(&w, &declared).unwrap_err(),
            "field `geo.lat` (number 1): the writer's type is string, the declared type is double"
        );
        let repeated = CLICK.replace("string event_id = 1;", "repeated string event_id = 1;");
        let w = Declared::parse(&repeated, "Click").unwrap().message;
        assert!(
            check_compatible(&w, &declared)
                .unwrap_err()
                .contains("the writer's field is repeated string, the declared one singular string")
        );
    }
}
