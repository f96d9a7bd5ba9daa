//! A data file's Delta statistics (the `add` action's `stats`), taken from
//! the parquet footer the writer just wrote: the row count, and each top-level
//! column's null count and, for numbers, dates, timestamps and strings known
//! exactly, its minimum and maximum, so engines can skip files (`_offset`,
//! `_timestamp`, `_partition` …). Delta writes timestamps to the millisecond:
//! a minimum is rounded down to it and a maximum up, so they still bound every
//! value (the protocol asks bounds, not the values themselves).

use arrow::datatypes::{DataType, Schema, TimeUnit};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::statistics::Statistics;
use serde_json::{Map, Value, json};

pub fn delta_stats(meta: &ParquetMetaData, schema: &Schema) -> String {
    let mut stats = json!({ "numRecords": meta.file_metadata().num_rows() });
    let (mut min, mut max, mut nulls) = (Map::new(), Map::new(), Map::new());
    let leaves = meta.file_metadata().schema_descr();
    for field in schema.fields() {
        // A top-level primitive column is the leaf whose path is just its name.
        let Some(leaf) = (0..leaves.num_columns()).find(|i| leaves.column(*i).path().parts() == [field.name().clone()])
        else {
            continue;
        };
        let mut null_count = Some(0u64);
        let mut bounds: Option<Option<(Value, Value)>> = None;
        for group in meta.row_groups() {
            let stats = group.column(leaf).statistics();
            null_count = null_count.zip(stats.and_then(Statistics::null_count_opt)).map(|(a, b)| a + b);
            let group_bounds = stats.and_then(|s| bounds_of(s, field.data_type()));
            bounds = Some(match (bounds, group_bounds) {
                (None, b) => b,
                (Some(Some((lo, hi))), Some((l, h))) => Some((lower(lo, l), higher(hi, h))),
                _ => None,
            });
        }
        if let Some(n) = null_count {
            nulls.insert(field.name().clone(), json!(n));
        }
        if let Some(Some((lo, hi))) = bounds {
            min.insert(field.name().clone(), lo);
            max.insert(field.name().clone(), hi);
        }
    }
    stats["minValues"] = Value::Object(min);
    stats["maxValues"] = Value::Object(max);
    stats["nullCount"] = Value::Object(nulls);
    stats.to_string()
}

/// A row group's exact bounds for a column of `data_type`, as Delta writes them.
fn bounds_of(stats: &Statistics, data_type: &DataType) -> Option<(Value, Value)> {
    let pair = |lo: Value, hi: Value| Some((lo, hi));
    match (stats, data_type) {
        (Statistics::Int32(s), DataType::Int8 | DataType::Int16 | DataType::Int32) => {
            pair(json!(s.min_opt()?), json!(s.max_opt()?))
        }
        (Statistics::Int32(s), DataType::Date32) => pair(json!(date(*s.min_opt()?)?), json!(date(*s.max_opt()?)?)),
        (Statistics::Int64(s), DataType::Int64) => pair(json!(s.min_opt()?), json!(s.max_opt()?)),
        (Statistics::Int64(s), DataType::Timestamp(unit, zone)) => {
            let millis = |v: i64, up: bool| -> Option<i64> {
                let per_milli = match unit {
                    TimeUnit::Second => return v.checked_mul(1000),
                    TimeUnit::Millisecond => return Some(v),
                    TimeUnit::Microsecond => 1_000,
                    TimeUnit::Nanosecond => 1_000_000,
                };
                Some(if up {
                    v.div_euclid(per_milli) + i64::from(v.rem_euclid(per_milli) != 0)
                } else {
                    v.div_euclid(per_milli)
                })
            };
            let text = |ms: i64| timestamp(ms, zone.is_some());
            pair(json!(text(millis(*s.min_opt()?, false)?)?), json!(text(millis(*s.max_opt()?, true)?)?))
        }
        (Statistics::Float(s), DataType::Float32) if s.min_opt()?.is_finite() && s.max_opt()?.is_finite() => {
            pair(json!(s.min_opt()?), json!(s.max_opt()?))
        }
        (Statistics::Double(s), DataType::Float64) if s.min_opt()?.is_finite() && s.max_opt()?.is_finite() => {
            pair(json!(s.min_opt()?), json!(s.max_opt()?))
        }
        (Statistics::ByteArray(s), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
            if s.min_is_exact() && s.max_is_exact() =>
        {
            let text = |b: &parquet::data_type::ByteArray| std::str::from_utf8(b.data()).ok().map(str::to_string);
            pair(json!(text(s.min_opt()?)?), json!(text(s.max_opt()?)?))
        }
        _ => None,
    }
}

/// Days since the epoch as `YYYY-MM-DD`.
fn date(days: i32) -> Option<String> {
    let date = chrono_free_date(days as i64)?;
    Some(format!("{:04}-{:02}-{:02}", date.0, date.1, date.2))
}

/// Milliseconds since the epoch as Delta writes a timestamp's statistic:
/// `2026-11-28T09:30:00.120Z`, without the `Z` for one without a time zone.
fn timestamp(ms: i64, utc: bool) -> Option<String> {
    let (days, in_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (year, month, day) = chrono_free_date(days)?;
    let (h, m, s, milli) = (in_day / 3_600_000, in_day / 60_000 % 60, in_day / 1000 % 60, in_day % 1000);
    let zone = if utc { "Z" } else { "" };
    Some(format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}{zone}"))
}

/// The civil date of a day number (Howard Hinnant's algorithm).
fn chrono_free_date(days: i64) -> Option<(i64, u32, u32)> {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (0..=9999).contains(&year).then_some((year, month, day))
}

fn lower(a: Value, b: Value) -> Value {
    if less(&b, &a) { b } else { a }
}

fn higher(a: Value, b: Value) -> Value {
    if less(&a, &b) { b } else { a }
}

fn less(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x < y,
            _ => x.as_f64() < y.as_f64(),
        },
        (Value::String(x), Value::String(y)) => x < y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Date32Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    use super::*;

    #[test]
    fn counts_bounds_and_nulls_over_every_row_group() {
        let batch = RecordBatch::try_from_iter([
            ("_offset", Arc::new(Int64Array::from(vec![Some(7), None, Some(-3), Some(12)])) as ArrayRef),
            ("name", Arc::new(StringArray::from(vec![Some("b"), Some("a"), None, Some("c")])) as ArrayRef),
            ("day", Arc::new(Date32Array::from(vec![0, 19_723, -1, 59]))),
            // 2026-11-28T09:30:00.120001Z, …00.999999, …00.000000, 1969-12-31T23:59:59.999500
            (
                "_timestamp",
                Arc::new(
                    TimestampMicrosecondArray::from(vec![
                        1_795_858_200_120_001,
                        1_795_858_200_999_999,
                        1_795_858_200_000_000,
                        -500,
                    ])
                    .with_timezone("UTC"),
                ),
            ),
            ("local", Arc::new(TimestampMicrosecondArray::from(vec![Some(1_500), None, None, Some(2_000)]))),
        ])
        .unwrap();
        let props = WriterProperties::builder().set_max_row_group_row_count(Some(2)).build();
        let mut writer = ArrowWriter::try_new(Vec::new(), batch.schema(), Some(props)).unwrap();
        writer.write(&batch).unwrap();
        let meta = writer.close().unwrap();
        assert_eq!(meta.num_row_groups(), 2);
        let stats: Value = serde_json::from_str(&delta_stats(&meta, &batch.schema())).unwrap();
        assert_eq!(
            stats,
            json!({
                "numRecords": 4,
                "minValues": { "_offset": -3, "name": "a", "day": "1969-12-31",
                               "_timestamp": "1969-12-31T23:59:59.999Z", "local": "1970-01-01T00:00:00.001" },
                // Maxima rounded up to the millisecond, bounding the microseconds.
                "maxValues": { "_offset": 12, "name": "c", "day": "2024-01-01",
                               "_timestamp": "2026-11-28T09:30:01.000Z", "local": "1970-01-01T00:00:00.002" },
                "nullCount": { "_offset": 1, "name": 1, "day": 0, "_timestamp": 0, "local": 2 },
            })
        );
    }
}
