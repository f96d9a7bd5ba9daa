//! What a Delta table can hold. Every Arrow type a plugin may return is
//! written as a type the Delta protocol has (casting where that loses nothing a
//! reader could see), or refused with the column and what to do instead; and
//! every written type has its name in the Delta schema.
//!
//! | Arrow | written as | Delta |
//! |---|---|---|
//! | `Int8`…`Int64`, `Float32`, `Float64`, `Boolean` | the same | `byte`…`long`, `float`, `double`, `boolean` |
//! | `UInt8`, `UInt16`, `UInt32` | `Int16`, `Int32`, `Int64` | `short`, `integer`, `long` |
//! | `UInt64` | `Decimal128(20, 0)` | `decimal(20,0)` |
//! | `Float16` | `Float32` | `float` |
//! | `Utf8`, `LargeUtf8`, `Utf8View`, `Dictionary(_, Utf8)` | the same | `string` |
//! | `Binary`, `LargeBinary`, `BinaryView`; `FixedSizeBinary` | the same; `Binary` | `binary` |
//! | `Date32`; `Date64` | the same; `Date32` | `date` |
//! | `Timestamp(s|ms|µs|ns, tz)` | `Timestamp(µs, tz)` | `timestamp` (`timestamp_ntz` without a zone) |
//! | `Duration` | `Int64`, microseconds | `long` |
//! | `Decimal32`/`64`/`128`, `Decimal256` up to 38 digits | `Decimal128` | `decimal(p,s)` |
//! | `List`, `LargeList`, `FixedSizeList`; `Struct`; `Map` | lists; the same | `array`; `struct`; `map` |
//!
//! Nanosecond timestamps keep whole microseconds, the finest unit Delta has.
//! Every Delta column is declared nullable (a file may still be stricter), so
//! that adding a column is the only change a table's schema ever needs.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, FieldRef, Fields, Schema, SchemaRef, TimeUnit};
use serde_json::{Value, json};

/// A column whose type no Delta table can hold.
#[derive(Debug, thiserror::Error)]
#[error("column `{column}` is {found}, which a Delta table cannot hold: {instead}")]
pub struct UnsupportedType {
    pub column: String,
    pub found: String,
    pub instead: &'static str,
}

/// A plugin's output schema, and the schema its table's files are written with.
#[derive(Debug, Clone)]
pub struct TableTypes {
    /// `None` when the output is written as it is.
    cast_to: Option<SchemaRef>,
    written: SchemaRef,
}

impl TableTypes {
    pub fn new(output: &Schema) -> Result<Self, UnsupportedType> {
        let fields: Vec<FieldRef> = output
            .fields()
            .iter()
            .map(|f| Ok(Arc::new(f.as_ref().clone().with_data_type(written_type(f.data_type(), f.name())?))))
            .collect::<Result<_, UnsupportedType>>()?;
        let written = Arc::new(Schema::new_with_metadata(fields, output.metadata().clone()));
        let same = written.fields() == output.fields();
        Ok(Self { cast_to: (!same).then(|| written.clone()), written })
    }

    /// The schema the table's file is written with.
    pub fn written(&self) -> &SchemaRef {
        &self.written
    }

    /// `batch` (of the output schema) as written.
    pub fn cast(&self, batch: RecordBatch) -> anyhow::Result<RecordBatch> {
        let Some(to) = &self.cast_to else { return Ok(batch) };
        // Safe casts only: a value that does not fit is an error, never a null.
        let options = CastOptions { safe: false, ..Default::default() };
        let columns: Vec<ArrayRef> = batch
            .columns()
            .iter()
            .zip(to.fields())
            .map(|(column, field)| {
                cast_column(column, field.data_type(), &options)
                    .map_err(|e| anyhow::anyhow!("writing column `{}` as {}: {e}", field.name(), field.data_type()))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(RecordBatch::try_new(to.clone(), columns)?)
    }
}

fn cast_column(column: &ArrayRef, to: &DataType, options: &CastOptions) -> arrow::error::Result<ArrayRef> {
    match (column.data_type(), to) {
        (from, to) if from == to => Ok(column.clone()),
        // A duration is its count of microseconds.
        (DataType::Duration(unit), DataType::Int64) => {
            let micros = match unit {
                TimeUnit::Microsecond => column.clone(),
                _ => cast_with_options(column, &DataType::Duration(TimeUnit::Microsecond), options)?,
            };
            cast_with_options(&micros, &DataType::Int64, options)
        }
        _ => cast_with_options(column, to, options),
    }
}

/// The type a column of `data_type` is written with.
fn written_type(data_type: &DataType, column: &str) -> Result<DataType, UnsupportedType> {
    use DataType::*;
    let refuse = |instead| Err(UnsupportedType { column: column.to_string(), found: data_type.to_string(), instead });
    Ok(match data_type {
        Boolean | Int8 | Int16 | Int32 | Int64 | Float32 | Float64 | Utf8 | LargeUtf8 | Utf8View | Binary
        | LargeBinary | BinaryView | Date32 => data_type.clone(),
        UInt8 => Int16,
        UInt16 => Int32,
        UInt32 => Int64,
        UInt64 => Decimal128(20, 0),
        Float16 => Float32,
        FixedSizeBinary(_) => Binary,
        Date64 => Date32,
        Timestamp(_, zone) => Timestamp(TimeUnit::Microsecond, zone.clone()),
        Duration(_) => Int64,
        Decimal32(p, s) | Decimal64(p, s) | Decimal128(p, s) => Decimal128(*p, *s),
        Decimal256(p, s) if *p <= 38 => Decimal128(*p, *s),
        Decimal256(..) => return refuse("Delta decimals have at most 38 digits; return it as a string"),
        Dictionary(_, values) => match written_type(values, column)? {
            same if same == **values => data_type.clone(),
            other => other,
        },
        List(item) => List(written_field(item, column)?),
        LargeList(item) => LargeList(written_field(item, column)?),
        FixedSizeList(item, _) | ListView(item) | LargeListView(item) => List(written_field(item, column)?),
        Struct(fields) => Struct(written_fields(fields, column)?),
        Map(entries, sorted) => Map(written_field(entries, column)?, *sorted),
        Time32(_) | Time64(_) => return refuse("Delta has no time of day; return it as a string or a count"),
        Interval(_) => return refuse("Delta has no interval; return it as a duration or a count"),
        Null => return refuse("Delta has no column of nulls only; give it the type its values would have"),
        Union(..) => return refuse("Delta has no union; return a struct with one field per variant"),
        RunEndEncoded(..) => return refuse("return the values themselves, not run-end encoded"),
    })
}

fn written_field(field: &FieldRef, column: &str) -> Result<FieldRef, UnsupportedType> {
    let path = format!("{column}.{}", field.name());
    Ok(Arc::new(field.as_ref().clone().with_data_type(written_type(field.data_type(), &path)?)))
}

fn written_fields(fields: &Fields, column: &str) -> Result<Fields, UnsupportedType> {
    fields.iter().map(|f| written_field(f, column)).collect()
}

/// The Delta schema (its `schemaString`, as JSON) of a written schema.
pub fn delta_schema(written: &Schema) -> Value {
    struct_type(written.fields())
}

fn struct_type(fields: &Fields) -> Value {
    let fields: Vec<Value> = fields
        .iter()
        .map(|f| json!({ "name": f.name(), "type": delta_type(f.data_type()), "nullable": true, "metadata": {} }))
        .collect();
    json!({ "type": "struct", "fields": fields })
}

fn delta_type(data_type: &DataType) -> Value {
    use DataType::*;
    let name = match data_type {
        Boolean => "boolean",
        Int8 => "byte",
        Int16 => "short",
        Int32 => "integer",
        Int64 => "long",
        Float32 => "float",
        Float64 => "double",
        Utf8 | LargeUtf8 | Utf8View => "string",
        Binary | LargeBinary | BinaryView => "binary",
        Date32 => "date",
        Timestamp(_, Some(_)) => "timestamp",
        Timestamp(_, None) => "timestamp_ntz",
        Decimal128(p, s) => return json!(format!("decimal({p},{s})")),
        Dictionary(_, values) => return delta_type(values),
        List(item) | LargeList(item) => {
            return json!({ "type": "array", "elementType": delta_type(item.data_type()), "containsNull": true });
        }
        Struct(fields) => return struct_type(fields),
        Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else { unreachable!("a map's entries are a struct") };
            return json!({
                "type": "map",
                "keyType": delta_type(kv[0].data_type()),
                "valueType": delta_type(kv[1].data_type()),
                "valueContainsNull": true,
            });
        }
        other => unreachable!("{other} is never written: written_type maps it"),
    };
    json!(name)
}

/// Whether a Delta schema has a `timestamp_ntz` anywhere (a table feature readers must know).
pub fn has_timestamp_ntz(schema: &Value) -> bool {
    match schema {
        Value::String(name) => name == "timestamp_ntz",
        Value::Array(items) => items.iter().any(has_timestamp_ntz),
        Value::Object(map) => map.values().any(has_timestamp_ntz),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{
        Array, Decimal128Array, DurationMillisecondArray, FixedSizeBinaryArray, Int64Array, StringArray,
        TimestampMicrosecondArray, TimestampMillisecondArray, UInt32Array, UInt64Array,
    };
    use arrow::datatypes::Field;

    use super::*;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).unwrap()
    }

    #[test]
    fn delta_types_pass_as_they_are_and_others_are_cast_without_loss() {
        let ok = batch(vec![
            ("id", Arc::new(Int64Array::from(vec![1, 2]))),
            ("name", Arc::new(StringArray::from(vec!["a", "b"]))),
            ("at", Arc::new(TimestampMicrosecondArray::from(vec![1, 2]).with_timezone("+00:00"))),
        ]);
        let types = TableTypes::new(&ok.schema()).unwrap();
        assert!(types.cast_to.is_none());
        assert_eq!(types.cast(ok.clone()).unwrap(), ok);

        let other = batch(vec![
            ("n", Arc::new(UInt32Array::from(vec![u32::MAX, 0]))),
            ("big", Arc::new(UInt64Array::from(vec![u64::MAX, 7]))),
            ("at", Arc::new(TimestampMillisecondArray::from(vec![1_500, -2]).with_timezone("+00:00"))),
            ("took", Arc::new(DurationMillisecondArray::from(vec![3, 4]))),
            ("uuid", Arc::new(FixedSizeBinaryArray::try_from_iter([[1u8; 16], [2; 16]].into_iter()).unwrap())),
        ]);
        let types = TableTypes::new(&other.schema()).unwrap();
        let written = types.cast(other).unwrap();
        let col = |i: usize| written.column(i).clone();
        assert_eq!(col(0).as_any().downcast_ref::<Int64Array>().unwrap().values(), &[u32::MAX as i64, 0]);
        let big = col(1);
        let big = big.as_any().downcast_ref::<Decimal128Array>().unwrap();
        assert_eq!((big.value(0), big.precision(), big.scale()), (u64::MAX as i128, 20, 0));
        let at = col(2);
        assert_eq!(at.as_any().downcast_ref::<TimestampMicrosecondArray>().unwrap().values(), &[1_500_000, -2_000]);
        assert_eq!(col(3).as_any().downcast_ref::<Int64Array>().unwrap().values(), &[3_000, 4_000]);
        assert_eq!(col(4).data_type(), &DataType::Binary);
        assert_eq!(
            delta_schema(types.written())["fields"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["type"].clone())
                .collect::<Vec<_>>(),
            [json!("long"), json!("decimal(20,0)"), json!("timestamp"), json!("long"), json!("binary")]
        );
    }

    #[test]
    fn nested_types_are_cast_inside_and_named_in_delta_terms() {
        let item = Arc::new(Field::new("item", DataType::UInt16, true));
        let inner = Fields::from(vec![
            Field::new("at", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new("tags", DataType::List(item), true),
        ]);
        let schema = Schema::new(vec![Field::new("page", DataType::Struct(inner), true)]);
        let types = TableTypes::new(&schema).unwrap();
        let delta = delta_schema(types.written());
        assert_eq!(
            delta["fields"][0]["type"],
            json!({ "type": "struct", "fields": [
                { "name": "at", "type": "timestamp_ntz", "nullable": true, "metadata": {} },
                { "name": "tags", "type": { "type": "array", "elementType": "integer", "containsNull": true },
                  "nullable": true, "metadata": {} },
            ]})
        );
        assert!(has_timestamp_ntz(&delta));
    }

    #[test]
    fn a_type_delta_cannot_hold_is_refused_with_the_column_and_what_to_do() {
        let schema = Schema::new(vec![Field::new(
            "page",
            DataType::Struct(vec![Field::new("at", DataType::Time64(TimeUnit::Microsecond), true)].into()),
            true,
        )]);
        let err = TableTypes::new(&schema).unwrap_err().to_string();
        assert_eq!(
            err,
            "column `page.at` is Time64(µs), which a Delta table cannot hold: Delta has no time of day; return it as a string or a count"
        );
    }
}
