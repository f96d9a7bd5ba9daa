//! Functions by name (an expression's `call` nodes), spelt as Polars spells
//! them: conditionals, null filling, casts, text (`str.*`) and time (`dt.*`).
//! Each takes its subject first, then its arguments; an argument that must be
//! known before the rows are (a pattern, a group's index, a type) is a literal.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use arrow_arith::temporal::{DatePart, date_part};
use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::types::{Date32Type, Int64Type};
use arrow_array::{Array, BooleanArray, Date32Array, Int64Array, ListArray, StringArray, UInt32Array, cast::AsArray};
use arrow_cast::cast::{CastOptions, cast_with_options};
use arrow_schema::{DataType, TimeUnit};
use regex::{Regex, RegexBuilder};
use rustc_hash::FxBuildHasher;

use crate::expr::{Value, coerce, datums};

/// The largest a pattern may compile to: patterns past it (`(a{1000}){1000}`)
/// are refused rather than let grow until the memory cap stops the call.
const REGEX_SIZE: usize = 1 << 20;

/// The names `call` knows, for the error that lists them.
const NAMES: &[&str] = &[
    "when",
    "fill_null",
    "cast",
    "str.len_chars",
    "str.len_bytes",
    "str.to_lowercase",
    "str.to_uppercase",
    "str.strip_chars",
    "str.contains",
    "str.starts_with",
    "str.ends_with",
    "str.extract",
    "str.replace",
    "str.replace_all",
    "str.slice",
    "str.split",
    "list.get",
    "list.len",
    "struct.field",
    "dt.year",
    "dt.month",
    "dt.day",
    "dt.hour",
    "dt.minute",
    "dt.second",
    "dt.weekday",
    "dt.ordinal_day",
    "dt.truncate",
];

/// `name(args…)` over a frame of `rows` rows.
pub fn call(name: &str, args: &[Value], rows: usize) -> Result<Value, String> {
    let arity = |n: std::ops::RangeInclusive<usize>| {
        if n.contains(&args.len()) {
            Ok(())
        } else {
            Err(format!("{name} takes {} operands, not {}", describe(&n), args.len()))
        }
    };
    match name {
        "when" => {
            arity(3..=3)?;
            when(&args[0], args[1].clone(), args[2].clone(), rows)
        }
        "fill_null" => {
            arity(2..=2)?;
            let (value, fill) = coerce(args[0].clone(), args[1].clone(), "fill the nulls of")?;
            let present = arrow_arith::boolean::is_not_null(value.array()).map_err(|e| e.to_string())?;
            let kind = value.clone();
            let filled = datums(&value, &fill, |v, f| arrow_select::zip::zip(&present, v, f));
            Ok(kind.like(filled.map_err(|e| e.to_string())?))
        }
        "cast" => {
            arity(2..=2)?;
            let to = data_type(&text(&args[1], "the type")?)?;
            let strict = CastOptions { safe: false, ..Default::default() };
            let cast = cast_with_options(args[0].array(), &to, &strict).map_err(|e| format!("cannot cast: {e}"))?;
            Ok(args[0].like(cast))
        }
        "str.len_chars" => {
            arity(1..=1)?;
            let lengths: UInt32Array =
                strings(&args[0], name)?.iter().map(|s| s.map(|s| s.chars().count() as u32)).collect();
            Ok(args[0].like(Arc::new(lengths)))
        }
        "str.len_bytes" => {
            arity(1..=1)?;
            let lengths: UInt32Array = strings(&args[0], name)?.iter().map(|s| s.map(|s| s.len() as u32)).collect();
            Ok(args[0].like(Arc::new(lengths)))
        }
        "str.to_lowercase" => {
            arity(1..=1)?;
            map_text(&args[0], name, |s| Some(Cow::Owned(s.to_lowercase())))
        }
        "str.to_uppercase" => {
            arity(1..=1)?;
            map_text(&args[0], name, |s| Some(Cow::Owned(s.to_uppercase())))
        }
        "str.strip_chars" => {
            arity(1..=2)?;
            match args.get(1).map(|c| optional_text(c, "the characters")).transpose()?.flatten() {
                Some(chars) => {
                    let chars: Vec<char> = chars.chars().collect();
                    map_text(&args[0], name, |s| Some(Cow::Borrowed(s.trim_matches(chars.as_slice()))))
                }
                None => map_text(&args[0], name, |s| Some(Cow::Borrowed(s.trim()))),
            }
        }
        "str.contains" => {
            arity(2..=3)?;
            let literal = args.get(2).map(|l| flag(l, "literal")).transpose()?.unwrap_or(false);
            let pattern = text(&args[1], "the pattern")?;
            if literal {
                return matches(&args[0], name, |s| s.contains(pattern.as_str()));
            }
            let regex = regex(&pattern)?;
            matches(&args[0], name, |s| regex.is_match(s))
        }
        "str.starts_with" => {
            arity(2..=2)?;
            let prefix = text(&args[1], "the prefix")?;
            matches(&args[0], name, |s| s.starts_with(prefix.as_str()))
        }
        "str.ends_with" => {
            arity(2..=2)?;
            let suffix = text(&args[1], "the suffix")?;
            matches(&args[0], name, |s| s.ends_with(suffix.as_str()))
        }
        "str.extract" => {
            arity(2..=3)?;
            let regex = regex(&text(&args[1], "the pattern")?)?;
            let group = args.get(2).map(|g| int(g, "the group's index")).transpose()?.unwrap_or(1);
            let group = usize::try_from(group)
                .ok()
                .filter(|&g| g < regex.captures_len())
                .ok_or_else(|| format!("the pattern has no group {group} (it has {})", regex.captures_len() - 1))?;
            // One set of capture slots for every row: no allocation a row.
            let mut slots = regex.capture_locations();
            map_text(&args[0], name, |s| {
                regex.captures_read(&mut slots, s).and(slots.get(group)).map(|(a, b)| Cow::Borrowed(&s[a..b]))
            })
        }
        "str.replace" | "str.replace_all" => {
            arity(3..=4)?;
            let (pattern, with) = (text(&args[1], "the pattern")?, text(&args[2], "the replacement")?);
            let literal = args.get(3).map(|l| flag(l, "literal")).transpose()?.unwrap_or(false);
            let regex = if literal { regex(&regex::escape(&pattern))? } else { regex(&pattern)? };
            let limit = if name == "str.replace" { 1 } else { 0 };
            // A literal replacement takes `$` as itself; a pattern's, `$1` as its first group.
            let with = if literal { with.replace('$', "$$") } else { with };
            map_text(&args[0], name, |s| Some(regex.replacen(s, limit, with.as_str())))
        }
        "str.slice" => {
            arity(2..=3)?;
            let offset = int(&args[1], "the offset")?;
            let length = match args.get(2) {
                None => None,
                Some(l) if l.data_type() == &DataType::Null => None,
                Some(l) => {
                    Some(u64::try_from(int(l, "the length")?).map_err(|_| "the length is negative".to_string())?)
                }
            };
            let strings = strings(&args[0], name)?;
            let sliced =
                arrow_string::substring::substring_by_char(&strings, offset, length).map_err(|e| e.to_string())?;
            Ok(args[0].like(Arc::new(sliced)))
        }
        "str.split" => {
            arity(2..=2)?;
            let by = text(&args[1], "the separator")?;
            let strings = strings(&args[0], name)?;
            let mut lists = ListBuilder::new(StringBuilder::new());
            for s in strings.iter() {
                match s {
                    None => lists.append_null(),
                    // An empty separator splits between characters, as Polars does.
                    Some(s) if by.is_empty() => {
                        s.chars().for_each(|c| lists.values().append_value(c.encode_utf8(&mut [0; 4])));
                        lists.append(true);
                    }
                    Some(s) => {
                        s.split(by.as_str()).for_each(|part| lists.values().append_value(part));
                        lists.append(true);
                    }
                }
            }
            Ok(args[0].like(Arc::new(lists.finish())))
        }
        "struct.field" => {
            arity(2..=2)?;
            let name = text(&args[1], "the field's name")?;
            let Some(record) = args[0].array().as_struct_opt() else {
                return Err(format!("struct.field needs a struct (a nested record), not {}", args[0].data_type()));
            };
            let Some(at) = record.column_names().iter().position(|n| *n == name) else {
                return Err(format!(
                    "the struct has no field `{name}` (its fields: {})",
                    record.column_names().join(", ")
                ));
            };
            // A null record's field is null, whatever the child holds there.
            let field = record.column(at);
            let field = match record.nulls() {
                Some(nulls) if nulls.null_count() > 0 => {
                    let valid = BooleanArray::new(nulls.inner().clone(), None);
                    let none = arrow_array::new_null_array(field.data_type(), 1);
                    let none = arrow_array::Scalar::new(none);
                    arrow_select::zip::zip(&valid, field, &none).map_err(|e| e.to_string())?
                }
                _ => field.clone(),
            };
            Ok(args[0].like(field))
        }
        "list.len" => {
            arity(1..=1)?;
            let lists = list(&args[0], name)?;
            let lengths: UInt32Array =
                (0..lists.len()).map(|i| lists.is_valid(i).then(|| lists.value_length(i) as u32)).collect();
            Ok(args[0].like(Arc::new(lengths)))
        }
        "list.get" => {
            arity(2..=3)?;
            let at = int(&args[1], "the index")?;
            let lenient = args.get(2).map(|f| flag(f, "null_on_oob")).transpose()?.unwrap_or(false);
            let lists = list(&args[0], name)?;
            let offsets = lists.value_offsets();
            let mut picked = Vec::with_capacity(lists.len());
            for i in 0..lists.len() {
                if lists.is_null(i) {
                    picked.push(None);
                    continue;
                }
                let (start, n) = (offsets[i] as i64, (offsets[i + 1] - offsets[i]) as i64);
                let within = if at < 0 { n + at } else { at };
                match (0..n).contains(&within) {
                    true => picked.push(Some((start + within) as u32)),
                    false if lenient => picked.push(None),
                    false => {
                        return Err(format!(
                            "index {at} is out of bounds for a list of {n} (row {i}): pass null_on_oob=True for null there"
                        ));
                    }
                }
            }
            let taken = arrow_select::take::take(lists.values(), &UInt32Array::from(picked), None)
                .map_err(|e| e.to_string())?;
            Ok(args[0].like(taken))
        }
        "dt.truncate" => {
            arity(2..=2)?;
            truncate(&args[0], &text(&args[1], "the interval")?)
        }
        _ if name.starts_with("dt.") => {
            arity(1..=1)?;
            let part = match name {
                "dt.year" => DatePart::Year,
                "dt.month" => DatePart::Month,
                "dt.day" => DatePart::Day,
                "dt.hour" => DatePart::Hour,
                "dt.minute" => DatePart::Minute,
                "dt.second" => DatePart::Second,
                "dt.weekday" => DatePart::DayOfWeekMonday1,
                "dt.ordinal_day" => DatePart::DayOfYear,
                _ => return Err(unknown(name)),
            };
            if !args[0].data_type().is_temporal() {
                return Err(format!("{name} needs a date or a time, not {}", args[0].data_type()));
            }
            let part = date_part(args[0].array(), part).map_err(|e| e.to_string())?;
            Ok(args[0].like(part))
        }
        _ => Err(unknown(name)),
    }
}

fn unknown(name: &str) -> String {
    if ["len", "count", "sum", "mean", "min", "max", "first", "last"].contains(&name) {
        return format!("{name} is an aggregation: use it in group_by(…).agg(…)");
    }
    format!("no function {name} (there are {})", NAMES.join(", "))
}

fn describe(n: &std::ops::RangeInclusive<usize>) -> String {
    if n.start() == n.end() { n.start().to_string() } else { format!("{} to {}", n.start(), n.end()) }
}

/// `then` where `condition` holds, `otherwise` where it is false or null.
fn when(condition: &Value, then: Value, otherwise: Value, rows: usize) -> Result<Value, String> {
    let mask = match condition.data_type() {
        DataType::Boolean => condition.clone().broadcast(rows)?,
        DataType::Null => Arc::new(BooleanArray::from(vec![false; rows])),
        other => return Err(format!("when needs a boolean condition, not {other}")),
    };
    let (then, otherwise) = coerce(then, otherwise, "choose between")?;
    // A null `then` and a null `otherwise` make a column of nulls, as Polars makes one.
    let (then, otherwise) = match (then.data_type(), otherwise.data_type()) {
        (DataType::Null, DataType::Null) => {
            return Ok(Value::Array(arrow_array::new_null_array(&DataType::Null, rows)));
        }
        _ => (then, otherwise),
    };
    let chosen = datums(&then, &otherwise, |t, o| arrow_select::zip::zip(mask.as_boolean(), t, o));
    Ok(Value::Array(chosen.map_err(|e| e.to_string())?))
}

/// The type a cast names: Polars' names (`Int64`, `Float64`, `String`,
/// `Boolean`, `Date`, `Datetime`) or arrow's (`Utf8`, `Timestamp(µs, "UTC")`).
fn data_type(name: &str) -> Result<DataType, String> {
    let polars = match name.to_ascii_lowercase().as_str() {
        "int8" => DataType::Int8,
        "int16" => DataType::Int16,
        "int32" => DataType::Int32,
        "int64" => DataType::Int64,
        "uint8" => DataType::UInt8,
        "uint16" => DataType::UInt16,
        "uint32" => DataType::UInt32,
        "uint64" => DataType::UInt64,
        "float32" => DataType::Float32,
        "float64" => DataType::Float64,
        "string" | "utf8" | "str" => DataType::Utf8,
        "boolean" | "bool" => DataType::Boolean,
        "date" => DataType::Date32,
        "datetime" => DataType::Timestamp(TimeUnit::Microsecond, None),
        _ => {
            return name
                .parse()
                .map_err(|_| format!("no type {name:?} (Int64, Float64, String, Boolean, Date, Datetime …)"));
        }
    };
    Ok(polars)
}

/// A literal text argument.
fn text(v: &Value, what: &str) -> Result<String, String> {
    optional_text(v, what)?.ok_or_else(|| format!("{what} is null"))
}

fn optional_text(v: &Value, what: &str) -> Result<Option<String>, String> {
    match (v, v.data_type()) {
        (_, DataType::Null) => Ok(None),
        (Value::Scalar(s), DataType::Utf8) => Ok(Some(s.as_string::<i32>().value(0).to_string())),
        (Value::Scalar(_), other) => Err(format!("{what} must be text, not {other}")),
        (Value::Array(_), _) => Err(format!("{what} must be a literal, not a column")),
    }
}

/// A literal integer argument.
fn int(v: &Value, what: &str) -> Result<i64, String> {
    match v {
        Value::Scalar(s) if s.data_type().is_integer() && s.is_valid(0) => {
            let s = arrow_cast::cast(s, &DataType::Int64).map_err(|e| e.to_string())?;
            Ok(s.as_primitive::<Int64Type>().value(0))
        }
        Value::Scalar(s) => Err(format!("{what} must be an integer, not {}", s.data_type())),
        Value::Array(_) => Err(format!("{what} must be a literal, not a column")),
    }
}

/// A literal boolean argument.
fn flag(v: &Value, what: &str) -> Result<bool, String> {
    match v {
        Value::Scalar(s) if s.data_type() == &DataType::Boolean && s.is_valid(0) => Ok(s.as_boolean().value(0)),
        _ => Err(format!("{what} must be true or false")),
    }
}

fn regex(pattern: &str) -> Result<Regex, String> {
    RegexBuilder::new(pattern).size_limit(REGEX_SIZE).dfa_size_limit(REGEX_SIZE).build().map_err(|e| match e {
        regex::Error::CompiledTooBig(limit) => {
            format!("the pattern {pattern:?} compiles to more than {limit} bytes: simplify it")
        }
        e => format!("the pattern {pattern:?} is not a regular expression: {e}"),
    })
}

/// The subject as text (a large or view string column read as one).
fn strings(v: &Value, name: &str) -> Result<StringArray, String> {
    match v.data_type() {
        DataType::Utf8 => Ok(v.array().as_string::<i32>().clone()),
        DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => {
            let cast = arrow_cast::cast(v.array(), &DataType::Utf8).map_err(|e| e.to_string())?;
            Ok(cast.as_string::<i32>().clone())
        }
        other => Err(format!("{name} needs text, not {other}")),
    }
}

/// The subject as a list column.
fn list<'a>(v: &'a Value, name: &str) -> Result<&'a ListArray, String> {
    v.array()
        .as_list_opt::<i32>()
        .ok_or_else(|| format!("{name} needs a list (str.split makes one), not {}", v.data_type()))
}

/// Each text value through `f` (null where it gives none); nulls stay null.
fn map_text(
    v: &Value,
    name: &str,
    mut f: impl for<'s> FnMut(&'s str) -> Option<Cow<'s, str>>,
) -> Result<Value, String> {
    let strings = strings(v, name)?;
    let mut memo = Memo::default();
    let mut mapped = StringBuilder::with_capacity(strings.len(), strings.value_data().len());
    for s in strings.iter() {
        match s {
            Some(s) => mapped.append_option(memo.get(s, &mut f).as_deref()),
            None => mapped.append_null(),
        }
    }
    Ok(v.like(Arc::new(mapped.finish())))
}

/// Whether each text value satisfies `f`; nulls stay null.
fn matches(v: &Value, name: &str, mut f: impl FnMut(&str) -> bool) -> Result<Value, String> {
    let strings = strings(v, name)?;
    let mut memo = Memo::default();
    let mapped: BooleanArray = strings.iter().map(|s| s.map(|s| *memo.get(s, &mut f))).collect();
    Ok(v.like(Arc::new(mapped)))
}

/// Answers a text function gave, by value: a column's text often repeats (a
/// URL, a country, a device), and looking one up costs a fraction of a
/// regular expression's search. Once most of the first rows turn out to be
/// distinct, it stops remembering, so a column of unique values pays for
/// [`MEMO_TRIAL`] lookups only; it holds at most [`MEMO_MAX`] answers.
struct Memo<'s, T> {
    seen: HashMap<&'s str, T, FxBuildHasher>,
    rows: usize,
    off: bool,
}

const MEMO_TRIAL: usize = 1024;
const MEMO_MAX: usize = 4096;

impl<T> Default for Memo<'_, T> {
    fn default() -> Self {
        Self { seen: HashMap::default(), rows: 0, off: false }
    }
}

impl<'s, T: Clone> Memo<'s, T> {
    /// `f(s)`, remembered: lent from the memo where it is kept, so an answer
    /// that owns text is not copied for every row that repeats it.
    fn get(&mut self, s: &'s str, f: &mut impl FnMut(&'s str) -> T) -> Cow<'_, T> {
        if self.off {
            return Cow::Owned(f(s));
        }
        self.rows += 1;
        if self.rows >= MEMO_TRIAL && self.seen.len() * 2 > self.rows {
            (self.off, self.seen) = (true, HashMap::default());
            return Cow::Owned(f(s));
        }
        if self.seen.len() < MEMO_MAX {
            return Cow::Borrowed(self.seen.entry(s).or_insert_with(|| f(s)));
        }
        match self.seen.get(s) {
            Some(known) => Cow::Borrowed(known),
            None => Cow::Owned(f(s)),
        }
    }
}

/// Dates and times rounded down to a multiple of `every` (`1d`, `6h`, `15m`,
/// `30s`, `500ms`), counted from the Unix epoch, as Polars' `dt.truncate`
/// does for fixed intervals (in UTC: a column's time zone is not applied).
fn truncate(v: &Value, every: &str) -> Result<Value, String> {
    const DAY: i64 = 86_400_000_000;
    let micros = interval_micros(every)?;
    match v.data_type() {
        DataType::Timestamp(unit, _) => {
            let step = match unit {
                TimeUnit::Second => (micros % 1_000_000 == 0).then(|| micros / 1_000_000),
                TimeUnit::Millisecond => (micros % 1_000 == 0).then(|| micros / 1_000),
                TimeUnit::Microsecond => Some(micros),
                TimeUnit::Nanosecond => micros.checked_mul(1_000),
            };
            let step = step.ok_or_else(|| format!("a timestamp in {unit:?}s truncates to whole ones, not {every}"))?;
            let values = arrow_cast::cast(v.array(), &DataType::Int64).map_err(|e| e.to_string())?;
            let floored: Int64Array =
                values.as_primitive::<Int64Type>().iter().map(|t| t.map(|t| t.div_euclid(step) * step)).collect();
            let back = arrow_cast::cast(&floored, v.data_type()).map_err(|e| e.to_string())?;
            Ok(v.like(back))
        }
        DataType::Date32 | DataType::Date64 => {
            if micros % DAY != 0 {
                return Err(format!("a date truncates to whole days, not {every}"));
            }
            let step = (micros / DAY) as i32;
            let days = arrow_cast::cast(v.array(), &DataType::Date32).map_err(|e| e.to_string())?;
            let floored: Date32Array =
                days.as_primitive::<Date32Type>().iter().map(|d| d.map(|d| d.div_euclid(step) * step)).collect();
            let back = arrow_cast::cast(&floored, v.data_type()).map_err(|e| e.to_string())?;
            Ok(v.like(back))
        }
        other => Err(format!("dt.truncate needs a date or a timestamp, not {other}")),
    }
}

/// `every` (`1d`, `6h`, `15m`, `30s`, `500ms`, `10us`, `1w`) in microseconds.
fn interval_micros(every: &str) -> Result<i64, String> {
    let digits = every.find(|c: char| !c.is_ascii_digit()).unwrap_or(every.len());
    let (count, unit) = every.split_at(digits);
    let count: i64 = count.parse().ok().filter(|&n| n > 0).ok_or_else(|| bad_interval(every))?;
    let micros = match unit {
        "w" => 7 * 86_400_000_000,
        "d" => 86_400_000_000,
        "h" => 3_600_000_000,
        "m" => 60_000_000,
        "s" => 1_000_000,
        "ms" => 1_000,
        "us" => 1,
        _ => return Err(bad_interval(every)),
    };
    count.checked_mul(micros).ok_or_else(|| bad_interval(every))
}

fn bad_interval(every: &str) -> String {
    format!("{every:?} is no interval: write a count and a unit, w, d, h, m, s, ms or us (`1h`, `15m`)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_answers_are_the_answers_whether_values_repeat_or_not() {
        let count = |s: &str| s.len() % 7;
        // Few distinct values: remembered throughout.
        let repeating: Vec<String> = (0..5000).map(|i| format!("v{}", i % 10)).collect();
        let mut memo = Memo::default();
        let mut calls = 0;
        for s in &repeating {
            let answer = *memo.get(s, &mut |s: &str| {
                calls += 1;
                count(s)
            });
            assert_eq!(answer, count(s));
        }
        assert_eq!(calls, 10);
        // All distinct: it stops remembering after the trial, holding nothing.
        let unique: Vec<String> = (0..5000).map(|i| format!("u{i}")).collect();
        let mut memo = Memo::default();
        for s in &unique {
            assert_eq!(*memo.get(s, &mut |s: &str| count(s)), count(s));
        }
        assert!(memo.off && memo.seen.is_empty());
    }
}
