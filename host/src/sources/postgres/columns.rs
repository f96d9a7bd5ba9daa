//! A PostgreSQL table's columns as weir reads them: each column's type mapped
//! to the Arrow type its table holds, and its values, as the server writes
//! them in text (in the replication stream and in COPY alike), parsed into it.
//!
//! | PostgreSQL | Arrow |
//! |---|---|
//! | `boolean` | `Boolean` |
//! | `smallint`, `integer`, `bigint` | `Int16`, `Int32`, `Int64` |
//! | `oid`, `xid` … (unsigned 32-bit) | `Int64` |
//! | `real`, `double precision` | `Float32`, `Float64` |
//! | `numeric(p,s)`, p ≤ 38 | `Decimal128(p,s)` |
//! | `numeric` without a precision, or wider | `Utf8` (its exact digits: no scale to fix) |
//! | `text`, `varchar`, `char`, `name`, `json`, `jsonb`, `uuid`, `xml`, enums, `inet`, `interval`, `time` … | `Utf8` |
//! | `bytea` | `Binary` |
//! | `date` | `Date32` |
//! | `timestamp` | `Timestamp(µs)` |
//! | `timestamptz` | `Timestamp(µs, UTC)` |
//! | one-dimensional arrays of these | `List` |
//! | a domain | its base type |
//!
//! Composite types and arrays of arrays have no column type here: a table with
//! one is refused at registration, naming the column. Both connections weir
//! opens pin `DateStyle=ISO`, `TimeZone=UTC`, `IntervalStyle=iso_8601` and
//! `extra_float_digits=3`, so the text is the same whichever path it came by.

use std::sync::Arc;

use arrow::array::builder::NullBufferBuilder;
use arrow::array::{
    ArrayRef, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder,
    Int16Builder, Int32Builder, Int64Builder, ListArray, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};

use crate::formats::rfc3339;

/// The session settings that fix how the server writes values in text.
pub const SESSION_OPTIONS: &str =
    "-c datestyle=ISO,YMD -c timezone=UTC -c intervalstyle=iso_8601 -c extra_float_digits=3";

/// What a column holds, as weir reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnType {
    Bool,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Decimal { precision: u8, scale: i8 },
    Text,
    Bytes,
    Date,
    Timestamp,
    TimestampTz,
    List(Box<ColumnType>),
}

/// One column of a source table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    /// The type as PostgreSQL names it (`numeric(10,2)`), for messages.
    pub pg_type: String,
    pub type_oid: u32,
    pub typmod: i32,
    pub ty: ColumnType,
    /// Part of the replica identity (the primary key, by default).
    pub key: bool,
}

/// What the catalog says of a column's type: enough to map it.
#[derive(Debug, Clone)]
pub struct TypeInfo {
    pub oid: u32,
    pub typmod: i32,
    /// `pg_type.typtype`: `b` base, `e` enum, `d` domain, `c` composite, `r` range, `m` multirange, `p` pseudo.
    pub kind: char,
    /// `pg_type.typcategory`: `A` for arrays.
    pub category: char,
    /// An array's element (its type info), or a domain's base.
    pub inner: Option<Box<TypeInfo>>,
}

/// A column no table weir writes can hold.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("column `{column}` is of type {pg_type}, which weir cannot read: {why}")]
pub struct Unmappable {
    pub column: String,
    pub pg_type: String,
    pub why: &'static str,
}

impl ColumnType {
    /// Maps a column's type (`pg_type` is its name, for the error).
    pub fn of(info: &TypeInfo) -> Result<Self, &'static str> {
        Ok(match info.oid {
            16 => Self::Bool,
            21 => Self::Int16,
            23 => Self::Int32,
            20 | 26 | 28 | 5069 => Self::Int64, // int8, oid, xid, xid8
            700 => Self::Float32,
            701 => Self::Float64,
            1700 => match numeric_precision(info.typmod) {
                Some((precision, scale)) if precision <= 38 => Self::Decimal { precision, scale },
                _ => Self::Text,
            },
            17 => Self::Bytes,
            1082 => Self::Date,
            1114 => Self::Timestamp,
            1184 => Self::TimestampTz,
            _ => match (info.kind, info.category, &info.inner) {
                ('d', _, Some(base)) => {
                    let base = TypeInfo { typmod: info.typmod, ..(**base).clone() };
                    return Self::of(&base);
                }
                (_, 'A', Some(element)) => {
                    let element = TypeInfo { typmod: info.typmod, ..(**element).clone() };
                    match Self::of(&element)? {
                        Self::List(_) => return Err("arrays of arrays are not read"),
                        element => Self::List(Box::new(element)),
                    }
                }
                ('c', ..) => return Err("composite types are not read; select its fields into columns of their own"),
                ('p', ..) => return Err("a pseudo-type holds no value"),
                // Everything else has a faithful text form: enums, json, uuid, network
                // addresses, intervals, times, ranges, geometry …
                _ => Self::Text,
            },
        })
    }

    /// Whether the column's type modifier decides what it holds
    /// (`numeric(p,s)`, alone or in an array), not only how long it may be.
    pub fn typmod_matters(&self) -> bool {
        match self {
            Self::Decimal { .. } => true,
            Self::List(item) => item.typmod_matters(),
            _ => false,
        }
    }

    /// The Arrow type its table holds.
    pub fn arrow(&self) -> DataType {
        match self {
            Self::Bool => DataType::Boolean,
            Self::Int16 => DataType::Int16,
            Self::Int32 => DataType::Int32,
            Self::Int64 => DataType::Int64,
            Self::Float32 => DataType::Float32,
            Self::Float64 => DataType::Float64,
            Self::Decimal { precision, scale } => DataType::Decimal128(*precision, *scale),
            Self::Text => DataType::Utf8,
            Self::Bytes => DataType::Binary,
            Self::Date => DataType::Date32,
            Self::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
            Self::TimestampTz => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            Self::List(item) => DataType::List(Arc::new(Field::new("item", item.arrow(), true))),
        }
    }

    /// Parses one value from the server's text form.
    pub fn parse<'a>(&self, text: &'a str) -> Result<Value<'a>, String> {
        let bad = |what: &str| format!("{text:?} is not {what}");
        Ok(match self {
            Self::Bool => match text {
                "t" => Value::Bool(true),
                "f" => Value::Bool(false),
                _ => return Err(bad("a boolean")),
            },
            Self::Int16 | Self::Int32 | Self::Int64 => Value::Int(text.parse().map_err(|_| bad("an integer"))?),
            Self::Float32 | Self::Float64 => Value::Float(text.parse().map_err(|_| bad("a number"))?),
            Self::Decimal { scale, .. } => Value::Decimal(decimal(text, *scale).ok_or_else(|| bad("a finite number"))?),
            Self::Text => Value::Text(text),
            Self::Bytes => Value::Bytes(bytea(text).ok_or_else(|| bad("bytea in hex form"))?),
            Self::Date => Value::Int(date(text).ok_or_else(|| bad("a date weir can hold"))?.into()),
            Self::Timestamp => Value::Int(timestamp(text, false).ok_or_else(|| bad("a timestamp weir can hold"))?),
            Self::TimestampTz => Value::Int(timestamp(text, true).ok_or_else(|| bad("a timestamp weir can hold"))?),
            Self::List(item) => {
                let elements = array(text).ok_or_else(|| bad("a one-dimensional array"))?;
                let values = elements
                    .into_iter()
                    .map(|e| match e {
                        None => Ok(Value::Null),
                        Some(e) => item.parse_owned(e),
                    })
                    .collect::<Result<_, _>>()?;
                Value::List(values)
            }
        })
    }

    /// Parses an element that had to be unescaped (so is owned).
    fn parse_owned(&self, text: std::borrow::Cow<'_, str>) -> Result<Value<'static>, String> {
        Ok(match self.parse(&text)? {
            Value::Text(s) => Value::Owned(s.to_string()),
            Value::Null => Value::Null,
            Value::Bool(b) => Value::Bool(b),
            Value::Int(i) => Value::Int(i),
            Value::Float(f) => Value::Float(f),
            Value::Decimal(d) => Value::Decimal(d),
            Value::Bytes(b) => Value::Bytes(b),
            Value::Owned(s) => Value::Owned(s),
            Value::List(_) => return Err("arrays of arrays are not read".into()),
        })
    }
}

/// A parsed value, ready to append.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Null,
    Bool(bool),
    /// Integers, days since the epoch, microseconds since the epoch.
    Int(i64),
    Float(f64),
    /// Unscaled, at the column's scale.
    Decimal(i128),
    Text(&'a str),
    Owned(String),
    Bytes(Vec<u8>),
    List(Vec<Value<'static>>),
}

/// `numeric(p,s)`'s precision and scale from its typmod (`None`: unconstrained).
fn numeric_precision(typmod: i32) -> Option<(u8, i8)> {
    if typmod < 4 {
        return None;
    }
    let t = typmod - 4;
    let precision = (t >> 16) & 0xffff;
    // The scale is an 11-bit signed number (PostgreSQL 15 allows negative scales).
    let scale = ((t & 0x7ff) ^ 1024) - 1024;
    (1..=38).contains(&precision).then_some(())?;
    (0..=precision).contains(&scale).then_some((precision as u8, scale as i8))
}

/// `-12.50` at scale 2 → `-1250`; rounds half away from zero past the scale.
fn decimal(text: &str, scale: i8) -> Option<i128> {
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let mut value: i128 = 0;
    for b in whole.bytes() {
        value = value.checked_mul(10)?.checked_add(i128::from(ascii_digit(b)?))?;
    }
    let scale = scale.max(0) as usize;
    let mut fraction = fraction.bytes();
    for _ in 0..scale {
        let digit = fraction.next().map_or(Some(0), ascii_digit)?;
        value = value.checked_mul(10)?.checked_add(i128::from(digit))?;
    }
    if let Some(next) = fraction.next() {
        if ascii_digit(next)? >= 5 {
            value = value.checked_add(1)?;
        }
        fraction.try_for_each(|b| ascii_digit(b).map(|_| ()))?;
    }
    Some(if negative { -value } else { value })
}

fn ascii_digit(b: u8) -> Option<u8> {
    b.is_ascii_digit().then(|| b - b'0')
}

/// `\x0aff` → bytes.
fn bytea(text: &str) -> Option<Vec<u8>> {
    let hex = text.strip_prefix("\\x")?;
    ::hex::decode(hex).ok()
}

/// `2026-12-07` → days since 1970-01-01 (BC dates and ±infinity are refused).
fn date(text: &str) -> Option<i32> {
    let days = (text.len() == 10).then(|| rfc3339::days(text.as_bytes()))??;
    i32::try_from(days).ok()
}

/// `2026-12-07 10:00:00.25` (and, with a zone, `+00`, `+05:30`, `-08`) →
/// microseconds since the epoch, UTC.
fn timestamp(text: &str, zoned: bool) -> Option<i64> {
    let (local, at) = rfc3339::local_micros(text.as_bytes())?;
    let offset_s = match (zoned, &text[at..]) {
        (false, "") => 0,
        (true, zone) if zone.starts_with(['+', '-']) => {
            let sign = if zone.starts_with('-') { -1 } else { 1 };
            let mut parts = zone[1..].split(':');
            let mut part = || -> Option<i64> {
                match parts.next() {
                    None => Some(0),
                    Some(p) if p.len() == 2 => p.parse().ok(),
                    Some(_) => None,
                }
            };
            let (hours, minutes, seconds) = (part()?, part()?, part()?);
            sign * (hours * 3600 + minutes * 60 + seconds)
        }
        _ => return None,
    };
    local.checked_sub(offset_s * 1_000_000)
}

/// A one-dimensional array's elements (`None`: NULL), unescaped; `None` for
/// anything else (arrays of arrays, explicit bounds).
fn array(text: &str) -> Option<Vec<Option<std::borrow::Cow<'_, str>>>> {
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    let mut out = Vec::new();
    if inner.is_empty() {
        return Some(out);
    }
    let bytes = inner.as_bytes();
    let mut i = 0;
    loop {
        if bytes.get(i) == Some(&b'"') {
            let mut element = String::new();
            i += 1;
            loop {
                match *bytes.get(i)? {
                    b'"' => break,
                    b'\\' => {
                        i += 1;
                        let c = inner[i..].chars().next()?;
                        element.push(c);
                        i += c.len_utf8();
                        continue;
                    }
                    _ => {
                        let c = inner[i..].chars().next()?;
                        element.push(c);
                        i += c.len_utf8();
                        continue;
                    }
                }
            }
            i += 1;
            out.push(Some(element.into()));
        } else {
            let end = inner[i..].find(',').map_or(inner.len(), |n| i + n);
            let element = &inner[i..end];
            if element.starts_with('{') {
                return None;
            }
            out.push((element != "NULL").then_some(element.into()));
            i = end;
        }
        match bytes.get(i) {
            None => return Some(out),
            Some(b',') => i += 1,
            Some(_) => return None,
        }
    }
}

/// Builds one column of a batch from parsed values.
pub enum Builder {
    Bool(BooleanBuilder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    Decimal(Decimal128Builder, DataType),
    Text(StringBuilder),
    Bytes(BinaryBuilder),
    Date(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder, Option<Arc<str>>),
    List { item: Box<Builder>, field: FieldRef, offsets: Vec<i32>, nulls: NullBufferBuilder },
}

impl Builder {
    pub fn new(ty: &ColumnType) -> Self {
        match ty {
            ColumnType::Bool => Self::Bool(BooleanBuilder::new()),
            ColumnType::Int16 => Self::Int16(Int16Builder::new()),
            ColumnType::Int32 => Self::Int32(Int32Builder::new()),
            ColumnType::Int64 => Self::Int64(Int64Builder::new()),
            ColumnType::Float32 => Self::Float32(Float32Builder::new()),
            ColumnType::Float64 => Self::Float64(Float64Builder::new()),
            ColumnType::Decimal { .. } => Self::Decimal(Decimal128Builder::new(), ty.arrow()),
            ColumnType::Text => Self::Text(StringBuilder::new()),
            ColumnType::Bytes => Self::Bytes(BinaryBuilder::new()),
            ColumnType::Date => Self::Date(Date32Builder::new()),
            ColumnType::Timestamp => Self::Timestamp(TimestampMicrosecondBuilder::new(), None),
            ColumnType::TimestampTz => Self::Timestamp(TimestampMicrosecondBuilder::new(), Some("UTC".into())),
            ColumnType::List(item) => Self::List {
                item: Box::new(Self::new(item)),
                field: Arc::new(Field::new("item", item.arrow(), true)),
                offsets: vec![0],
                nulls: NullBufferBuilder::new(0),
            },
        }
    }

    /// Appends a value parsed for this column's type (anything else is a bug).
    pub fn append(&mut self, value: &Value<'_>) {
        match (self, value) {
            (Self::Bool(b), Value::Null) => b.append_null(),
            (Self::Int16(b), Value::Null) => b.append_null(),
            (Self::Int32(b), Value::Null) => b.append_null(),
            (Self::Int64(b), Value::Null) => b.append_null(),
            (Self::Float32(b), Value::Null) => b.append_null(),
            (Self::Float64(b), Value::Null) => b.append_null(),
            (Self::Decimal(b, _), Value::Null) => b.append_null(),
            (Self::Text(b), Value::Null) => b.append_null(),
            (Self::Bytes(b), Value::Null) => b.append_null(),
            (Self::Date(b), Value::Null) => b.append_null(),
            (Self::Timestamp(b, _), Value::Null) => b.append_null(),
            (Self::List { offsets, nulls, .. }, Value::Null) => {
                offsets.push(*offsets.last().expect("offsets start at 0"));
                nulls.append_null();
            }
            (Self::Bool(b), Value::Bool(v)) => b.append_value(*v),
            // The server checked the range: a smallint's text fits an i16.
            (Self::Int16(b), Value::Int(v)) => b.append_value(*v as i16),
            (Self::Int32(b), Value::Int(v)) => b.append_value(*v as i32),
            (Self::Int64(b), Value::Int(v)) => b.append_value(*v),
            (Self::Float32(b), Value::Float(v)) => b.append_value(*v as f32),
            (Self::Float64(b), Value::Float(v)) => b.append_value(*v),
            (Self::Decimal(b, _), Value::Decimal(v)) => b.append_value(*v),
            (Self::Text(b), Value::Text(v)) => b.append_value(v),
            (Self::Text(b), Value::Owned(v)) => b.append_value(v),
            (Self::Bytes(b), Value::Bytes(v)) => b.append_value(v),
            (Self::Date(b), Value::Int(v)) => b.append_value(*v as i32),
            (Self::Timestamp(b, _), Value::Int(v)) => b.append_value(*v),
            (Self::List { item, offsets, nulls, .. }, Value::List(values)) => {
                values.iter().for_each(|v| item.append(v));
                offsets.push(offsets.last().expect("offsets start at 0") + values.len() as i32);
                nulls.append_non_null();
            }
            (_, value) => unreachable!("a value parsed for another type: {value:?}"),
        }
    }

    pub fn finish(&mut self) -> ArrayRef {
        match self {
            Self::Bool(b) => Arc::new(b.finish()),
            Self::Int16(b) => Arc::new(b.finish()),
            Self::Int32(b) => Arc::new(b.finish()),
            Self::Int64(b) => Arc::new(b.finish()),
            Self::Float32(b) => Arc::new(b.finish()),
            Self::Float64(b) => Arc::new(b.finish()),
            Self::Decimal(b, ty) => Arc::new(b.finish().with_data_type(ty.clone())),
            Self::Text(b) => Arc::new(b.finish()),
            Self::Bytes(b) => Arc::new(b.finish()),
            Self::Date(b) => Arc::new(b.finish()),
            Self::Timestamp(b, zone) => Arc::new(b.finish().with_timezone_opt(zone.clone())),
            Self::List { item, field, offsets, nulls } => {
                let values = item.finish();
                let offsets = OffsetBuffer::new(std::mem::replace(offsets, vec![0]).into());
                Arc::new(ListArray::new(field.clone(), offsets, values, nulls.finish()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(oid: u32, typmod: i32) -> TypeInfo {
        TypeInfo { oid, typmod, kind: 'b', category: 'N', inner: None }
    }

    #[test]
    fn numeric_typmods() {
        // numeric(10,2): ((10 << 16) | 2) + 4
        let typmod = ((10 << 16) | 2) + 4;
        assert_eq!(ColumnType::of(&info(1700, typmod)), Ok(ColumnType::Decimal { precision: 10, scale: 2 }));
        assert_eq!(ColumnType::of(&info(1700, -1)), Ok(ColumnType::Text), "unconstrained numeric keeps its digits");
        assert_eq!(ColumnType::of(&info(1700, ((50 << 16) | 2) + 4)), Ok(ColumnType::Text), "wider than 38 digits");
    }

    #[test]
    fn values_parse_from_their_text() {
        let dec = ColumnType::Decimal { precision: 10, scale: 2 };
        assert_eq!(dec.parse("-12.5"), Ok(Value::Decimal(-1250)));
        assert_eq!(dec.parse("3.14159"), Ok(Value::Decimal(314)));
        assert_eq!(dec.parse("0.005"), Ok(Value::Decimal(1)));
        assert!(dec.parse("NaN").is_err());
        assert_eq!(ColumnType::Float64.parse("-Infinity"), Ok(Value::Float(f64::NEG_INFINITY)));
        assert_eq!(ColumnType::Bytes.parse("\\x00ff"), Ok(Value::Bytes(vec![0, 255])));
        assert_eq!(ColumnType::Date.parse("1970-01-02"), Ok(Value::Int(1)));
        assert!(ColumnType::Date.parse("infinity").is_err());
        assert_eq!(ColumnType::Timestamp.parse("1970-01-01 00:00:01.5"), Ok(Value::Int(1_500_000)));
        assert_eq!(ColumnType::TimestampTz.parse("1970-01-01 01:00:00+01"), Ok(Value::Int(0)));
        assert_eq!(ColumnType::TimestampTz.parse("1970-01-01 00:00:00-05:30"), Ok(Value::Int(19_800_000_000)));
        assert!(ColumnType::TimestampTz.parse("0044-03-15 12:00:00+00 BC").is_err());
        assert!(ColumnType::Timestamp.parse("1970-01-01 00:00:00+00").is_err(), "no zone in a timestamp");
        let ints = ColumnType::List(Box::new(ColumnType::Int32));
        assert_eq!(ints.parse("{1,NULL,3}"), Ok(Value::List(vec![Value::Int(1), Value::Null, Value::Int(3)])));
        assert_eq!(ints.parse("{}"), Ok(Value::List(vec![])));
        assert!(ints.parse("{{1,2},{3,4}}").is_err());
        let texts = ColumnType::List(Box::new(ColumnType::Text));
        assert_eq!(
            texts.parse(r#"{plain,"a, b","say \"hi\"","NULL",NULL}"#),
            Ok(Value::List(vec![
                Value::Owned("plain".into()),
                Value::Owned("a, b".into()),
                Value::Owned("say \"hi\"".into()),
                Value::Owned("NULL".into()),
                Value::Null
            ]))
        );
    }
}
