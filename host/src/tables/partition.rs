//! Partitioned tables: the `partition_by` a publisher declares, each entry a
//! column of its output table as it is (`country`) or through one of
//! Iceberg's transforms (`day(_timestamp)`, `bucket(16, user_id)`,
//! `truncate(4, url)`), with Iceberg's semantics.
//!
//! Delta has no transforms: a transformed entry becomes a column of its own,
//! derived by weir and named as Iceberg names its partition field
//! (`_timestamp_day`, `user_id_bucket`, `url_trunc`). `year`, `month` and
//! `day` give the date their period starts on, `hour` the timestamp its hour
//! starts at (all in UTC), so a reader filters on them as on the column they
//! come from: `WHERE _timestamp_day = DATE '2026-12-07'`. A batch is written
//! as one file per partition value, under Hive-style directories
//! (`country=DE/_timestamp_day=2026-12-07/part-….parquet`), the partition
//! columns in the Delta log (`partitionValues`) and not in the files, as
//! every Delta writer does.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray, Int32Array, RecordBatch, StringArray, new_null_array};
use arrow::compute::{cast, take_record_batch};
use arrow::datatypes::{
    DataType, Date32Type, Field, Int8Type, Int16Type, Int32Type, Int64Type, Schema, TimeUnit, TimestampMicrosecondType,
};
use arrow::row::{RowConverter, SortField};
use chrono::{Datelike, NaiveDate};

/// How many partition values one batch may write unless its declaration says
/// otherwise (`max_partitions_per_batch`): each is a file of its own, open
/// until the batch ends.
pub const DEFAULT_MAX_PARTITIONS: usize = 100;
/// The most a declaration may allow.
pub const MAX_PARTITIONS_LIMIT: usize = 10_000;

/// A transform of Iceberg's partition specs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    Identity,
    Year,
    Month,
    Day,
    Hour,
    /// `bucket(N, col)`: Iceberg's 32-bit Murmur3 hash of the value, modulo N.
    Bucket(u32),
    /// `truncate(W, col)`: integers down to a multiple of W, text to its first W characters.
    Truncate(u32),
}

/// One entry of `partition_by`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionField {
    /// The output column it is computed from.
    pub source: String,
    pub transform: Transform,
}

/// A table's partitioning: its fields, in order (outermost directory first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionSpec {
    pub fields: Vec<PartitionField>,
}

/// How a publisher's table is partitioned, and how many partition values one
/// batch may write (past it, the batch fails, saying so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partitioning {
    /// Empty: the table is not partitioned.
    pub spec: PartitionSpec,
    pub max_per_batch: usize,
}

impl Default for Partitioning {
    fn default() -> Self {
        Self { spec: PartitionSpec::default(), max_per_batch: DEFAULT_MAX_PARTITIONS }
    }
}

/// A file's partition: each partition column and its value as the Delta log
/// writes it (`None`: null), in the spec's order.
pub type PartitionValues = Vec<(String, Option<String>)>;

/// The directory Hive and Spark write a null partition value as.
const NULL_DIRECTORY: &str = "__HIVE_DEFAULT_PARTITION__";

impl PartitionField {
    /// `col`, `day(col)`, `bucket(16, col)`, `truncate(4, col)`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let usage = "write a column (`country`), or a transform of one: year(col), month(col), day(col), hour(col), bucket(N, col) or truncate(W, col)";
        let Some((name, rest)) = text.split_once('(') else {
            if text.is_empty() || text.contains([')', ',']) {
                return Err(format!("partition_by entry {text:?} is not a column: {usage}"));
            }
            return Ok(Self { source: text.to_string(), transform: Transform::Identity });
        };
        let inner = rest.strip_suffix(')').ok_or_else(|| format!("partition_by entry {text:?} lacks its `)`"))?;
        let args: Vec<&str> = inner.split(',').map(str::trim).collect();
        let name = name.trim().to_ascii_lowercase();
        let width = |what: &str| -> Result<u32, String> {
            args[0].parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                format!(
                    "partition_by entry {text:?}: {what} must be a whole number greater than zero, not {:?}",
                    args[0]
                )
            })
        };
        let (transform, column) = match (name.as_str(), args.as_slice()) {
            ("year", [c]) => (Transform::Year, *c),
            ("month", [c]) => (Transform::Month, *c),
            ("day", [c]) => (Transform::Day, *c),
            ("hour", [c]) => (Transform::Hour, *c),
            ("bucket", [_, c]) => (Transform::Bucket(width("the number of buckets")?), *c),
            ("truncate", [_, c]) => (Transform::Truncate(width("the width")?), *c),
            ("year" | "month" | "day" | "hour", _) => {
                return Err(format!("partition_by entry {text:?}: {name} takes one column, as in {name}(_timestamp)"));
            }
            ("bucket" | "truncate", _) => {
                let n = if name == "bucket" { "N" } else { "W" };
                return Err(format!(
                    "partition_by entry {text:?}: {name} takes {n} and a column, as in {name}(16, id)"
                ));
            }
            _ => return Err(format!("partition_by entry {text:?}: no transform `{name}`; {usage}")),
        };
        if column.is_empty() {
            return Err(format!("partition_by entry {text:?} names no column"));
        }
        Ok(Self { source: column.to_string(), transform })
    }

    /// The entry as written in a declaration, in its one canonical form.
    pub fn text(&self) -> String {
        let c = &self.source;
        match self.transform {
            Transform::Identity => c.clone(),
            Transform::Year => format!("year({c})"),
            Transform::Month => format!("month({c})"),
            Transform::Day => format!("day({c})"),
            Transform::Hour => format!("hour({c})"),
            Transform::Bucket(n) => format!("bucket({n}, {c})"),
            Transform::Truncate(w) => format!("truncate({w}, {c})"),
        }
    }

    /// Its column in the table: the source itself, or the derived column
    /// named as Iceberg names the partition field.
    pub fn column(&self) -> String {
        let c = &self.source;
        match self.transform {
            Transform::Identity => c.clone(),
            Transform::Year => format!("{c}_year"),
            Transform::Month => format!("{c}_month"),
            Transform::Day => format!("{c}_day"),
            Transform::Hour => format!("{c}_hour"),
            Transform::Bucket(_) => format!("{c}_bucket"),
            Transform::Truncate(_) => format!("{c}_trunc"),
        }
    }

    /// The type of its column, for a source column of type `source`; or why it does not fit.
    fn result_type(&self, source: &DataType) -> Result<DataType, String> {
        use DataType::*;
        let text =
            |t: &DataType| matches!(t, Utf8 | LargeUtf8 | Utf8View) || matches!(t, Dictionary(_, v) if **v == Utf8);
        let integer = matches!(source, Int8 | Int16 | Int32 | Int64);
        let fits = match self.transform {
            Transform::Identity => {
                (integer || text(source) || matches!(source, Boolean | Date32 | Timestamp(..))).then(|| source.clone())
            }
            Transform::Year | Transform::Month | Transform::Day => {
                matches!(source, Date32 | Timestamp(TimeUnit::Microsecond, _)).then_some(Date32)
            }
            Transform::Hour => matches!(source, Timestamp(TimeUnit::Microsecond, _)).then(|| source.clone()),
            Transform::Bucket(_) => (integer
                || text(source)
                || matches!(source, Date32 | Timestamp(TimeUnit::Microsecond, _) | Binary | LargeBinary))
            .then_some(Int32),
            Transform::Truncate(_) if text(source) => Some(Utf8),
            Transform::Truncate(_) => (integer || matches!(source, Binary | LargeBinary)).then(|| source.clone()),
        };
        fits.ok_or_else(|| {
            let takes = match self.transform {
                Transform::Identity => {
                    "a partition column must be a string, an integer, a boolean, a date or a timestamp (partition by bucket(N, col) or truncate(W, col) of it instead)"
                }
                Transform::Year | Transform::Month | Transform::Day => "it takes a date or a timestamp",
                Transform::Hour => "it takes a timestamp",
                Transform::Bucket(_) => "it takes an integer, a string, a binary, a date or a timestamp",
                Transform::Truncate(_) => "it takes an integer, a string or a binary",
            };
            format!("partition_by entry `{}`: column `{}` is {source}, and {takes}", self.text(), self.source)
        })
    }

    /// Its column's values for `source` (of a type [`Self::result_type`] accepts).
    fn apply(&self, source: &ArrayRef) -> anyhow::Result<ArrayRef> {
        const DAY_MICROS: i64 = 86_400_000_000;
        const HOUR_MICROS: i64 = 3_600_000_000;
        let days = |source: &ArrayRef| -> anyhow::Result<arrow::array::Date32Array> {
            Ok(match source.data_type() {
                DataType::Date32 => source.as_primitive::<Date32Type>().clone(),
                _ => source
                    .as_primitive::<TimestampMicrosecondType>()
                    .unary(|micros| micros.div_euclid(DAY_MICROS) as i32),
            })
        };
        let start_of = |days: arrow::array::Date32Array, month: bool| -> ArrayRef {
            Arc::new(days.unary::<_, Date32Type>(|d| {
                let Some(date) = Date32Type::to_naive_date_opt(d) else { return d };
                let start = NaiveDate::from_ymd_opt(date.year(), if month { date.month() } else { 1 }, 1);
                start.map_or(d, Date32Type::from_naive_date)
            }))
        };
        Ok(match self.transform {
            Transform::Identity => source.clone(),
            Transform::Day => Arc::new(days(source)?),
            Transform::Month => start_of(days(source)?, true),
            Transform::Year => start_of(days(source)?, false),
            Transform::Hour => {
                let hours = source
                    .as_primitive::<TimestampMicrosecondType>()
                    .unary::<_, TimestampMicrosecondType>(|m| m.div_euclid(HOUR_MICROS) * HOUR_MICROS);
                Arc::new(hours.with_data_type(source.data_type().clone()))
            }
            Transform::Bucket(n) => Arc::new(bucket(source, n)?),
            Transform::Truncate(w) => truncate(source, w as usize)?,
        })
    }
}

/// Iceberg's hash of each value (its spec's "32-bit hash requirements"):
/// integers, dates and timestamps as a 64-bit little-endian integer, text as
/// its UTF-8 bytes; then `(hash & i32::MAX) % n`.
fn bucket(source: &ArrayRef, n: u32) -> anyhow::Result<Int32Array> {
    let of = |bytes: &[u8]| {
        let hash = murmur3::murmur3_32(&mut std::io::Cursor::new(bytes), 0).unwrap_or(0) as i32;
        (hash & i32::MAX) % n as i32
    };
    let longs = |values: Vec<Option<i64>>| -> Int32Array {
        values.into_iter().map(|v| v.map(|v| of(&v.to_le_bytes()))).collect()
    };
    Ok(match source.data_type() {
        DataType::Int8 => longs(source.as_primitive::<Int8Type>().iter().map(|v| v.map(i64::from)).collect()),
        DataType::Int16 => longs(source.as_primitive::<Int16Type>().iter().map(|v| v.map(i64::from)).collect()),
        DataType::Int32 => longs(source.as_primitive::<Int32Type>().iter().map(|v| v.map(i64::from)).collect()),
        DataType::Int64 => longs(source.as_primitive::<Int64Type>().iter().collect()),
        DataType::Date32 => longs(source.as_primitive::<Date32Type>().iter().map(|v| v.map(i64::from)).collect()),
        DataType::Timestamp(..) => longs(source.as_primitive::<TimestampMicrosecondType>().iter().collect()),
        DataType::Binary | DataType::LargeBinary => {
            let bytes = cast(source, &DataType::Binary)?;
            bytes.as_binary::<i32>().iter().map(|v| v.map(of)).collect()
        }
        _ => {
            let text = cast(source, &DataType::Utf8)?;
            text.as_string::<i32>().iter().map(|v| v.map(|s| of(s.as_bytes()))).collect()
        }
    })
}

/// Iceberg's truncation: an integer `v` to `v - (v mod w)` (towards minus
/// infinity), text to its first `w` characters, bytes to the first `w`.
fn truncate(source: &ArrayRef, w: usize) -> anyhow::Result<ArrayRef> {
    let w64 = w as i64;
    let down = |v: i64| v - v.rem_euclid(w64);
    Ok(match source.data_type() {
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
            let longs = cast(source, &DataType::Int64)?;
            let truncated = longs.as_primitive::<Int64Type>().unary::<_, Int64Type>(down);
            cast(&(Arc::new(truncated) as ArrayRef), source.data_type())?
        }
        DataType::Binary | DataType::LargeBinary => {
            let bytes = cast(source, &DataType::Binary)?;
            let cut: BinaryArray = bytes.as_binary::<i32>().iter().map(|v| v.map(|b| &b[..b.len().min(w)])).collect();
            cast(&(Arc::new(cut) as ArrayRef), source.data_type())?
        }
        _ => {
            let text = cast(source, &DataType::Utf8)?;
            let cut: StringArray = text
                .as_string::<i32>()
                .iter()
                .map(|v| v.map(|s| s.char_indices().nth(w).map_or(s, |(at, _)| &s[..at])))
                .collect();
            Arc::new(cut)
        }
    })
}

impl PartitionSpec {
    /// A declaration's `partition_by`; duplicate columns are refused.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        let fields = entries.iter().map(|e| PartitionField::parse(e)).collect::<Result<Vec<_>, _>>()?;
        for (i, field) in fields.iter().enumerate() {
            if let Some(other) = fields[..i].iter().find(|f| f.column() == field.column()) {
                return Err(format!(
                    "partition_by names column `{}` twice ({} and {})",
                    field.column(),
                    other.text(),
                    field.text()
                ));
            }
        }
        Ok(Self { fields })
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The entries in their canonical form, as recorded with the table.
    pub fn texts(&self) -> Vec<String> {
        self.fields.iter().map(PartitionField::text).collect()
    }

    /// The table's partition columns, outermost first.
    pub fn columns(&self) -> Vec<String> {
        self.fields.iter().map(PartitionField::column).collect()
    }

    /// Whether a table with columns `schema` (as written) can be partitioned
    /// so: each source column there, of a type its transform takes, and no
    /// derived column's name taken by a column of its own.
    pub fn check(&self, schema: &Schema) -> Result<(), String> {
        for field in &self.fields {
            let source = schema.field_with_name(&field.source).map_err(|_| {
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                format!(
                    "partition_by entry `{}`: the table has no column `{}` (its columns: {})",
                    field.text(),
                    field.source,
                    names.join(", ")
                )
            })?;
            field.result_type(source.data_type())?;
            if field.transform != Transform::Identity && schema.field_with_name(&field.column()).is_ok() {
                return Err(format!(
                    "partition_by entry `{}` makes column `{}`, and the table has a column of that name already: rename it",
                    field.text(),
                    field.column()
                ));
            }
        }
        Ok(())
    }

    /// `batch` (as written) with the derived columns after its own.
    pub fn derive(&self, batch: &RecordBatch) -> anyhow::Result<RecordBatch> {
        self.check(&batch.schema()).map_err(anyhow::Error::msg)?;
        let derived: Vec<&PartitionField> = self.fields.iter().filter(|f| f.transform != Transform::Identity).collect();
        if derived.is_empty() {
            return Ok(batch.clone());
        }
        let (mut fields, mut columns): (Vec<Field>, Vec<ArrayRef>) =
            (batch.schema().fields().iter().map(|f| f.as_ref().clone()).collect(), batch.columns().to_vec());
        for field in derived {
            let source = batch.column_by_name(&field.source).expect("checked");
            let values = field.apply(source)?;
            fields.push(Field::new(field.column(), values.data_type().clone(), true));
            columns.push(values);
        }
        let schema = Schema::new_with_metadata(fields, batch.schema().metadata().clone());
        Ok(RecordBatch::try_new(Arc::new(schema), columns)?)
    }

    /// The rows of `batch` (with its derived columns) by partition, in the
    /// order each partition first appears, without the partition columns.
    pub fn split(&self, batch: &RecordBatch) -> anyhow::Result<Vec<(PartitionValues, RecordBatch)>> {
        let columns = self.columns();
        let keys: Vec<ArrayRef> = columns.iter().map(|c| batch.column_by_name(c).expect("derived").clone()).collect();
        let rest: Vec<usize> =
            (0..batch.num_columns()).filter(|&i| !columns.contains(batch.schema().field(i).name())).collect();
        let data = batch.project(&rest)?;
        let converter = RowConverter::new(keys.iter().map(|k| SortField::new(k.data_type().clone())).collect())?;
        let rows = converter.convert_columns(&keys)?;
        let mut groups: Vec<Vec<u32>> = Vec::new();
        let mut index: HashMap<&[u8], usize> = HashMap::new();
        for (i, row) in rows.iter().enumerate() {
            let at = *index.entry(row.data()).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[at].push(i as u32);
        }
        groups
            .into_iter()
            .map(|rows| {
                let first = rows[0] as usize;
                let values = columns.iter().cloned().zip(keys.iter().map(|k| value_text(k, first))).collect();
                let rows = if rows.len() == batch.num_rows() {
                    data.clone()
                } else {
                    take_record_batch(&data, &arrow::array::UInt32Array::from(rows))?
                };
                Ok((values, rows))
            })
            .collect()
    }
}

/// The partition columns of a table partitioned by `entries` (as recorded: valid).
pub fn columns_of(entries: &[String]) -> Vec<String> {
    PartitionSpec::parse(entries).map(|s| s.columns()).unwrap_or_else(|_| entries.to_vec())
}

/// A partition value as the Delta log writes it (`None`: null; an empty
/// string partitions as null too, as in Hive and Spark).
fn value_text(column: &ArrayRef, row: usize) -> Option<String> {
    if column.is_null(row) {
        return None;
    }
    let text = match column.data_type() {
        DataType::Date32 => {
            let days = column.as_primitive::<Date32Type>().value(row);
            Date32Type::to_naive_date_opt(days).map_or_else(|| days.to_string(), |d| d.to_string())
        }
        DataType::Timestamp(..) => {
            let micros = column.as_primitive::<TimestampMicrosecondType>().value(row);
            let at = chrono::DateTime::from_timestamp_micros(micros).map(|t| t.naive_utc()).unwrap_or_default();
            match micros.rem_euclid(1_000_000) {
                0 => at.format("%Y-%m-%d %H:%M:%S").to_string(),
                _ => at.format("%Y-%m-%d %H:%M:%S%.6f").to_string(),
            }
        }
        _ => arrow::util::display::array_value_to_string(column, row).ok()?,
    };
    (!text.is_empty()).then_some(text)
}

/// The partition's directory under the table's: `col=value/…`, each value
/// escaped as delta-rs escapes it.
pub fn directory(values: &PartitionValues) -> String {
    values
        .iter()
        .map(|(column, value)| {
            format!("{}={}", escape(column), value.as_deref().map_or_else(|| NULL_DIRECTORY.to_string(), escape))
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Where the file `key` (in its table's directory) goes when it holds the
/// partition with `values`: in that partition's directory, under the same name.
pub fn file_key(key: &str, values: &PartitionValues) -> String {
    if values.is_empty() {
        return key.to_string();
    }
    let (table, name) = key.rsplit_once('/').expect("a table file's key is inside its table's directory");
    format!("{table}/{}/{name}", directory(values))
}

/// A partition directory's column or value, escaped as delta-rs escapes it:
/// each byte but a URL's unreserved characters as `%XX` (a superset of
/// Hive's escapes, and a name every object store keeps as it is).
fn escape(text: &str) -> String {
    super::delta::log::percent_encode(text, b"")
}

/// `batch`, read from a file of a partition, with the partition's columns
/// (each of the type `types` gives it, a string where none is given) after its own.
pub fn with_values(
    batch: RecordBatch,
    values: &PartitionValues,
    types: &dyn Fn(&str) -> Option<DataType>,
) -> anyhow::Result<RecordBatch> {
    if values.is_empty() {
        return Ok(batch);
    }
    let rows = batch.num_rows();
    let (mut fields, mut columns): (Vec<Field>, Vec<ArrayRef>) =
        (batch.schema().fields().iter().map(|f| f.as_ref().clone()).collect(), batch.columns().to_vec());
    for (column, value) in values {
        if batch.schema().field_with_name(column).is_ok() {
            continue;
        }
        let data_type = types(column).unwrap_or(DataType::Utf8);
        let values: ArrayRef = match value {
            None => new_null_array(&data_type, rows),
            Some(text) => {
                let text: ArrayRef = Arc::new(StringArray::from(vec![text.as_str()]));
                let one = cast(&text, &data_type)
                    .map_err(|e| anyhow::anyhow!("partition value {text:?} of column `{column}`: {e}", text = text))?;
                arrow::compute::take(&one, &arrow::array::UInt32Array::from(vec![0; rows]), None)?
            }
        };
        fields.push(Field::new(column, data_type, true));
        columns.push(values);
    }
    let schema = Schema::new_with_metadata(fields, batch.schema().metadata().clone());
    Ok(RecordBatch::try_new(Arc::new(schema), columns)?)
}

/// The Arrow type of a Delta primitive type's name (a partition column's).
pub fn arrow_type(delta: &str) -> Option<DataType> {
    Some(match delta {
        "string" => DataType::Utf8,
        "long" => DataType::Int64,
        "integer" => DataType::Int32,
        "short" => DataType::Int16,
        "byte" => DataType::Int8,
        "boolean" => DataType::Boolean,
        "date" => DataType::Date32,
        "timestamp" => DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
        "timestamp_ntz" => DataType::Timestamp(TimeUnit::Microsecond, None),
        "binary" => DataType::Binary,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Date32Array, Int64Array, TimestampMicrosecondArray};

    fn spec(entries: &[&str]) -> PartitionSpec {
        PartitionSpec::parse(&entries.iter().map(|e| e.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn entries_parse_into_one_canonical_form_and_mistakes_say_what_to_write() {
        let s = spec(&["country", " DAY( _timestamp ) ", "bucket(16,user_id)", "truncate( 4 , url)"]);
        assert_eq!(s.texts(), ["country", "day(_timestamp)", "bucket(16, user_id)", "truncate(4, url)"]);
        assert_eq!(s.columns(), ["country", "_timestamp_day", "user_id_bucket", "url_trunc"]);
        let err = |e: &[&str]| PartitionSpec::parse(&e.iter().map(|e| e.to_string()).collect::<Vec<_>>()).unwrap_err();
        assert!(err(&["week(ts)"]).contains("no transform `week`"), "{}", err(&["week(ts)"]));
        assert!(err(&["bucket(0, id)"]).contains("number of buckets must be a whole number greater than zero"));
        assert!(err(&["bucket(id)"]).contains("bucket takes N and a column"));
        assert!(err(&["day(ts, 2)"]).contains("day takes one column"));
        assert!(err(&["day(ts"]).contains("lacks its `)`"));
        assert!(err(&["day(ts)", "day(ts)"]).contains("names column `ts_day` twice"));
        assert!(err(&[""]).contains("is not a column"));
    }

    #[test]
    fn columns_are_checked_against_the_table() {
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("score", DataType::Float64, true),
            Field::new("at", DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())), true),
            Field::new("at_day", DataType::Int64, true),
        ]);
        assert!(spec(&["id", "hour(at)", "bucket(4, id)"]).check(&schema).is_ok());
        let err = |e: &str| spec(&[e]).check(&schema).unwrap_err();
        assert!(err("country").contains("the table has no column `country` (its columns: id, score, at, at_day)"));
        assert!(err("score").contains("column `score` is Float64, and a partition column must be a string"));
        assert!(err("day(id)").contains("it takes a date or a timestamp"));
        assert!(err("day(at)").contains("makes column `at_day`, and the table has a column of that name already"));
    }

    /// The examples of Iceberg's spec, Appendix B ("32-bit hash requirements").
    #[test]
    fn buckets_hash_as_iceberg_does() {
        let hash = |a: ArrayRef| bucket(&a, i32::MAX as u32).unwrap().value(0);
        let full = |h: i32| h & i32::MAX;
        assert_eq!(hash(Arc::new(arrow::array::Int32Array::from(vec![34]))), full(2017239379));
        assert_eq!(hash(Arc::new(Int64Array::from(vec![34]))), full(2017239379));
        assert_eq!(hash(Arc::new(StringArray::from(vec!["iceberg"]))), full(1210000089));
        assert_eq!(hash(Arc::new(BinaryArray::from(vec![&[0u8, 1, 2, 3][..]]))), full(-188683207));
        let date = NaiveDate::from_ymd_opt(2017, 11, 16).unwrap();
        assert_eq!(hash(Arc::new(Date32Array::from(vec![Date32Type::from_naive_date(date)]))), full(-653330422));
        let at = date.and_hms_opt(22, 31, 8).unwrap().and_utc().timestamp_micros();
        let ts = TimestampMicrosecondArray::from(vec![at]).with_timezone("+00:00");
        assert_eq!(hash(Arc::new(ts)), full(-2047944441));
        assert_eq!(
            bucket(&(Arc::new(Int64Array::from(vec![Some(34), None])) as ArrayRef), 16).unwrap().value(0),
            2017239379 % 16
        );
    }

    #[test]
    fn truncation_and_dates_follow_iceberg() {
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![1, -1, 10, 9]));
        assert_eq!(truncate(&ints, 10).unwrap().as_primitive::<Int64Type>().values(), &[0, -10, 10, 0]);
        let text: ArrayRef = Arc::new(StringArray::from(vec!["iceberg", "ab", "ñandú"]));
        let cut = truncate(&text, 3).unwrap();
        assert_eq!(cut.as_string::<i32>().iter().flatten().collect::<Vec<_>>(), ["ice", "ab", "ñan"]);

        // 1969-12-31 23:59:59.999999 and 2026-12-07 13:45:00, in UTC.
        let at: ArrayRef =
            Arc::new(TimestampMicrosecondArray::from(vec![-1, 1_796_651_100_000_000]).with_timezone("+00:00"));
        let text_of = |t: Transform| {
            let values = PartitionField { source: "at".into(), transform: t }.apply(&at).unwrap();
            (0..2).map(|i| value_text(&values, i).unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(text_of(Transform::Day), ["1969-12-31", "2026-12-07"]);
        assert_eq!(text_of(Transform::Month), ["1969-12-01", "2026-12-01"]);
        assert_eq!(text_of(Transform::Year), ["1969-01-01", "2026-01-01"]);
        assert_eq!(text_of(Transform::Hour), ["1969-12-31 23:00:00", "2026-12-07 13:00:00"]);
        assert_eq!(text_of(Transform::Identity), ["1969-12-31 23:59:59.999999", "2026-12-07 13:45:00"]);
    }

    #[test]
    fn a_batch_splits_into_partitions_that_read_back_whole() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("country", DataType::Utf8, true),
            Field::new("at", DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())), true),
        ]));
        let day = 86_400_000_000;
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3, 4])),
                Arc::new(StringArray::from(vec![Some("DE"), Some("a/b=c"), Some("DE"), None])),
                Arc::new(TimestampMicrosecondArray::from(vec![0, day, 5, 7]).with_timezone("+00:00")),
            ],
        )
        .unwrap();
        let s = spec(&["country", "day(at)"]);
        let parts = s.split(&s.derive(&batch).unwrap()).unwrap();
        let dirs: Vec<String> = parts.iter().map(|(v, _)| directory(v)).collect();
        assert_eq!(
            dirs,
            [
                "country=DE/at_day=1970-01-01",
                "country=a%2Fb%3Dc/at_day=1970-01-02",
                "country=__HIVE_DEFAULT_PARTITION__/at_day=1970-01-01"
            ]
        );
        let (values, rows) = &parts[0];
        assert_eq!(rows.schema().fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>(), ["id", "at"]);
        assert_eq!(rows.column(0).as_primitive::<Int64Type>().values(), &[1, 3]);
        let types = |c: &str| (c == "at_day").then_some(DataType::Date32);
        let back = with_values(rows.clone(), values, &types).unwrap();
        assert_eq!(back.schema().field_with_name("at_day").unwrap().data_type(), &DataType::Date32);
        assert_eq!(value_text(back.column_by_name("country").unwrap(), 1).as_deref(), Some("DE"));
        assert!(
            with_values(parts[2].1.clone(), &parts[2].0, &types).unwrap().column_by_name("country").unwrap().is_null(0)
        );
    }
}
