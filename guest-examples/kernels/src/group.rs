//! A frame's rows rearranged: reordered by keys (sort), one row per distinct
//! key with aggregations of each group's rows (group-by), the first row of
//! each distinct key (unique), and frames' rows end to end (concat).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, UInt32Array, cast::AsArray};
use arrow_ord::sort::{SortColumn, SortOptions, lexsort_to_indices};
use arrow_row::{RowConverter, SortField};
use arrow_schema::{DataType, Field, Schema};
use rustc_hash::FxBuildHasher;

use crate::exports::weir::frames::kernels::{Expr, Node};
use crate::expr;

/// `batch`'s rows in the order of `by` (`(key, descending)`), nulls first.
pub fn sort(batch: &RecordBatch, by: &[(Expr, bool)]) -> Result<RecordBatch, String> {
    if by.is_empty() {
        return Ok(batch.clone());
    }
    let columns = by
        .iter()
        .map(|(key, descending)| {
            let values = expr::column(key, batch)?;
            Ok(SortColumn { values, options: Some(SortOptions { descending: *descending, nulls_first: true }) })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let order = lexsort_to_indices(&columns, None).map_err(|e| format!("cannot sort: {e}"))?;
    arrow_select::take::take_record_batch(batch, &order).map_err(|e| e.to_string())
}

/// Which group each row is in (numbered in the order groups first appear),
/// and each group's first row. Each key column's values are numbered first
/// (text and integers hashed as they are, other types through arrow-row's
/// byte encoding), then the numbers of two columns at a time, packed in a
/// u64: cheaper than hashing every row's encoding of all its keys.
fn groups(keys: &[ArrayRef]) -> Result<(Vec<u32>, Vec<u32>), String> {
    let mut group_of = numbered(&keys[0])?;
    for key in &keys[1..] {
        let other = numbered(key)?;
        group_of = dense(group_of.iter().zip(&other).map(|(&a, &b)| (u64::from(a) << 32) | u64::from(b)));
    }
    let mut firsts = Vec::new();
    for (row, &group) in group_of.iter().enumerate() {
        // Numbers are handed out in order: a group's first row is where the next one appears.
        if group as usize == firsts.len() {
            firsts.push(row as u32);
        }
    }
    Ok((group_of, firsts))
}

/// Each value of `key` numbered in the order the values first appear (a null is one value).
fn numbered(key: &ArrayRef) -> Result<Vec<u32>, String> {
    match key.data_type() {
        DataType::Utf8 => Ok(dense(key.as_string::<i32>().iter())),
        ty if ty.is_integer() => {
            let wide = arrow_cast::cast(key, &DataType::Int64).map_err(|e| e.to_string())?;
            Ok(dense(wide.as_primitive::<Int64Type>().iter()))
        }
        ty => {
            let converter = RowConverter::new(vec![SortField::new(ty.clone())])
                .map_err(|e| format!("cannot group by a column of {ty}: {e}"))?;
            let rows = converter.convert_columns(std::slice::from_ref(key)).map_err(|e| e.to_string())?;
            Ok(dense(rows.iter().map(|row| row.data())))
        }
    }
}

/// Each value numbered in the order the values first appear.
fn dense<K: std::hash::Hash + Eq>(values: impl ExactSizeIterator<Item = K>) -> Vec<u32> {
    let mut index: HashMap<K, u32, FxBuildHasher> = HashMap::default();
    let mut numbers = Vec::with_capacity(values.len());
    for value in values {
        let next = index.len() as u32;
        numbers.push(*index.entry(value).or_insert(next));
    }
    numbers
}

/// One row per distinct value of `keys`, with `aggregations` of each group.
pub fn group_by(
    batch: &RecordBatch,
    keys: &[(String, Expr)],
    aggregations: &[(String, Expr)],
) -> Result<RecordBatch, String> {
    if keys.is_empty() {
        return Err("a group-by needs at least one key".into());
    }
    let key_values = keys.iter().map(|(_, k)| expr::column(k, batch)).collect::<Result<Vec<_>, _>>()?;
    let (group_of, firsts) = groups(&key_values)?;
    let firsts = UInt32Array::from(firsts);
    let mut fields = Vec::with_capacity(keys.len() + aggregations.len());
    let mut columns = Vec::with_capacity(keys.len() + aggregations.len());
    for ((name, _), values) in keys.iter().zip(&key_values) {
        let taken = arrow_select::take::take(values, &firsts, None).map_err(|e| e.to_string())?;
        fields.push(Field::new(name, taken.data_type().clone(), true));
        columns.push(taken);
    }
    for (name, aggregation) in aggregations {
        let column = aggregate(batch, aggregation, &group_of, firsts.len())
            .map_err(|problem| format!("{}: {problem}", expr::text(aggregation)))?;
        fields.push(Field::new(name, column.data_type().clone(), true));
        columns.push(column);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| e.to_string())
}

/// The first row of each distinct value of the columns `subset` names (of
/// every column when it names none), in the order they first appear.
pub fn unique(batch: &RecordBatch, subset: &[String]) -> Result<RecordBatch, String> {
    let keys = if subset.is_empty() {
        batch.columns().to_vec()
    } else {
        let schema = batch.schema();
        subset
            .iter()
            .map(|name| {
                schema.index_of(name).map(|i| batch.column(i).clone()).map_err(|_| expr::no_column(name, batch))
            })
            .collect::<Result<Vec<_>, _>>()?
    };
    if keys.is_empty() {
        return Ok(batch.clone());
    }
    let (_, firsts) = groups(&keys)?;
    if firsts.len() == batch.num_rows() {
        return Ok(batch.clone());
    }
    arrow_select::take::take_record_batch(batch, &UInt32Array::from(firsts)).map_err(|e| e.to_string())
}

/// The rows of `batches` one after the other: the same columns (by name and
/// type) in the same order, each nullable where any frame's is.
pub fn concat(batches: &[&RecordBatch]) -> Result<RecordBatch, String> {
    let Some(first) = batches.first() else { return Err("concat needs at least one frame".into()) };
    let describe = |b: &RecordBatch| {
        let fields: Vec<String> =
            b.schema().fields().iter().map(|f| format!("{}: {}", f.name(), f.data_type())).collect();
        fields.join(", ")
    };
    let mut fields: Vec<Field> = first.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    for (i, batch) in batches.iter().enumerate().skip(1) {
        let schema = batch.schema();
        let fits = schema.fields().len() == fields.len()
            && fields.iter().zip(schema.fields()).all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
        if !fits {
            return Err(format!(
                "concat: frame {} has columns ({}), unlike the first's ({}): select, rename or cast them to match",
                i + 1,
                describe(batch),
                describe(first)
            ));
        }
        for (field, other) in fields.iter_mut().zip(schema.fields()) {
            if other.is_nullable() {
                field.set_nullable(true);
            }
        }
    }
    let schema = Arc::new(Schema::new(fields));
    let columns = (0..schema.fields().len())
        .map(|c| {
            let arrays: Vec<&dyn Array> = batches.iter().map(|b| b.column(c).as_ref()).collect();
            arrow_select::concat::concat(&arrays).map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema, columns).map_err(|e| e.to_string())
}

/// `aggregation`'s value for each of `groups` groups.
fn aggregate(batch: &RecordBatch, aggregation: &Expr, group_of: &[u32], groups: usize) -> Result<ArrayRef, String> {
    let Some(Node::Call((function, args))) = aggregation.nodes.last() else {
        return Err("an aggregation ends in len, count, sum, mean, min, max, first or last".into());
    };
    if function == "len" {
        let mut counts = vec![0i64; groups];
        group_of.iter().for_each(|&g| counts[g as usize] += 1);
        return Ok(Arc::new(Int64Array::from(counts)));
    }
    let [of] = args.as_slice() else { return Err(format!("{function} takes one operand")) };
    let inner = Expr { nodes: aggregation.nodes[..=*of as usize].to_vec() };
    let values = expr::column(&inner, batch)?;
    match function.as_str() {
        "count" => {
            let mut counts = vec![0i64; groups];
            for (row, &g) in group_of.iter().enumerate() {
                counts[g as usize] += i64::from(values.is_valid(row));
            }
            Ok(Arc::new(Int64Array::from(counts)))
        }
        "first" | "last" => {
            let mut picked = vec![None; groups];
            for (row, &g) in group_of.iter().enumerate() {
                let slot = &mut picked[g as usize];
                if function == "last" || slot.is_none() {
                    *slot = Some(row as u32);
                }
            }
            let picked = UInt32Array::from(picked);
            arrow_select::take::take(&values, &picked, None).map_err(|e| e.to_string())
        }
        "sum" | "mean" | "min" | "max" => numeric(function, &values, group_of, groups),
        other => Err(format!("no aggregation {other} (there are len, count, sum, mean, min, max, first, last)")),
    }
}

/// Sums, means, minima and maxima of a numeric column: integers in int64
/// (a sum of none is 0, as in Polars), floats in float64, a mean always a float.
fn numeric(function: &str, values: &ArrayRef, group_of: &[u32], groups: usize) -> Result<ArrayRef, String> {
    let ty = values.data_type();
    if !ty.is_numeric() {
        return Err(format!("{function} needs numbers, not {ty}"));
    }
    let integer = ty.is_integer() && function != "mean";
    if integer {
        let values = arrow_cast::cast(values, &DataType::Int64).map_err(|e| e.to_string())?;
        let values = values.as_primitive::<Int64Type>();
        let mut acc: Vec<Option<i64>> = vec![if function == "sum" { Some(0) } else { None }; groups];
        for (row, &g) in group_of.iter().enumerate() {
            if values.is_null(row) {
                continue;
            }
            let v = values.value(row);
            let slot = &mut acc[g as usize];
            *slot = Some(match (*slot, function) {
                (None, _) => v,
                (Some(a), "sum") => a.checked_add(v).ok_or("the sum overflows int64")?,
                (Some(a), "min") => a.min(v),
                (Some(a), _) => a.max(v),
            });
        }
        let acc: ArrayRef = Arc::new(Int64Array::from(acc));
        // Minima and maxima keep the column's type.
        return match function {
            "sum" => Ok(acc),
            _ => arrow_cast::cast(&acc, ty).map_err(|e| e.to_string()),
        };
    }
    let values = arrow_cast::cast(values, &DataType::Float64).map_err(|e| e.to_string())?;
    let values = values.as_primitive::<Float64Type>();
    let mut acc: Vec<Option<f64>> = vec![if function == "sum" { Some(0.0) } else { None }; groups];
    let mut counts = vec![0u64; groups];
    for (row, &g) in group_of.iter().enumerate() {
        if values.is_null(row) {
            continue;
        }
        let v = values.value(row);
        counts[g as usize] += 1;
        let slot = &mut acc[g as usize];
        *slot = Some(match (*slot, function) {
            (None, _) => v,
            (Some(a), "sum" | "mean") => a + v,
            (Some(a), "min") => a.min(v),
            (Some(a), _) => a.max(v),
        });
    }
    if function == "mean" {
        acc.iter_mut().zip(&counts).for_each(|(a, &n)| *a = a.map(|s| s / n as f64));
    }
    let acc: ArrayRef = Arc::new(Float64Array::from(acc));
    match (function, ty) {
        ("min" | "max", DataType::Float32) => arrow_cast::cast(&acc, ty).map_err(|e| e.to_string()),
        _ => Ok(acc),
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::{Int32Array, StringArray};

    use super::*;

    fn batch() -> RecordBatch {
        let schema = Schema::new(vec![Field::new("k", DataType::Utf8, true), Field::new("v", DataType::Int32, true)]);
        let k = StringArray::from(vec![Some("b"), None, Some("a"), Some("b"), None, Some("c")]);
        let v = Int32Array::from(vec![Some(1), Some(5), None, Some(3), Some(-2), None]);
        RecordBatch::try_new(Arc::new(Schema::new(schema.fields().clone())), vec![Arc::new(k), Arc::new(v)]).unwrap()
    }

    fn col(name: &str) -> Expr {
        Expr { nodes: vec![Node::Column(name.into())] }
    }

    fn agg(function: &str, of: &str) -> Expr {
        Expr { nodes: vec![Node::Column(of.into()), Node::Call((function.into(), vec![0]))] }
    }

    #[test]
    fn groups_come_in_the_order_they_first_appear_and_nulls_are_one_group() {
        let aggregations: Vec<(String, Expr)> = ["len", "count", "sum", "mean", "min", "max", "first", "last"]
            .iter()
            .map(|f| {
                let e =
                    if *f == "len" { Expr { nodes: vec![Node::Call(("len".into(), vec![]))] } } else { agg(f, "v") };
                (f.to_string(), e)
            })
            .collect();
        let out = group_by(&batch(), &[("k".into(), col("k"))], &aggregations).unwrap();
        let keys: Vec<Option<&str>> = out.column(0).as_string::<i32>().iter().collect();
        assert_eq!(keys, [Some("b"), None, Some("a"), Some("c")]);
        let ints = |name: &str| -> Vec<Option<i64>> {
            let c = arrow_cast::cast(out.column_by_name(name).unwrap(), &DataType::Int64).unwrap();
            c.as_primitive::<Int64Type>().iter().collect()
        };
        assert_eq!(ints("len"), [Some(2), Some(2), Some(1), Some(1)]);
        assert_eq!(ints("count"), [Some(2), Some(2), Some(0), Some(0)]);
        // A sum of no values is 0, as in Polars; a minimum of none is null.
        assert_eq!(ints("sum"), [Some(4), Some(3), Some(0), Some(0)]);
        assert_eq!(ints("min"), [Some(1), Some(-2), None, None]);
        assert_eq!(ints("max"), [Some(3), Some(5), None, None]);
        assert_eq!(ints("first"), [Some(1), Some(5), None, None]);
        assert_eq!(ints("last"), [Some(3), Some(-2), None, None]);
        assert_eq!(out.column_by_name("min").unwrap().data_type(), &DataType::Int32, "min keeps the type");
        let means: Vec<Option<f64>> =
            out.column_by_name("mean").unwrap().as_primitive::<Float64Type>().iter().collect();
        assert_eq!(means, [Some(2.0), Some(1.5), None, None]);
    }

    #[test]
    fn unique_keeps_each_keys_first_row_in_order_and_concat_wants_the_same_columns() {
        let firsts = unique(&batch(), &["k".into()]).unwrap();
        let v: Vec<Option<i32>> = firsts.column(1).as_primitive::<arrow_array::types::Int32Type>().iter().collect();
        assert_eq!(v, [Some(1), Some(5), None, None], "b, null, a, c: the first of each");
        assert_eq!(unique(&batch(), &[]).unwrap(), batch(), "every row is distinct");
        assert!(unique(&batch(), &["nope".into()]).unwrap_err().contains("no column `nope`"));
        let both = concat(&[&batch(), &firsts]).unwrap();
        assert_eq!(both.num_rows(), 10);
        assert_eq!(both.slice(6, 4), firsts);
        let other = batch().project(&[1, 0]).unwrap();
        let refused = concat(&[&batch(), &other]).unwrap_err();
        assert_eq!(
            refused,
            "concat: frame 2 has columns (v: Int32, k: Utf8), unlike the first's (k: Utf8, v: Int32): \
             select, rename or cast them to match"
        );
    }

    #[test]
    fn sorting_is_stable_with_nulls_first_either_way() {
        let ascending = sort(&batch(), &[(col("k"), false)]).unwrap();
        let v: Vec<Option<i32>> = ascending.column(1).as_primitive::<arrow_array::types::Int32Type>().iter().collect();
        assert_eq!(v, [Some(5), Some(-2), None, Some(1), Some(3), None]);
        let descending = sort(&batch(), &[(col("v"), true)]).unwrap();
        let v: Vec<Option<i32>> = descending.column(1).as_primitive::<arrow_array::types::Int32Type>().iter().collect();
        assert_eq!(v, [None, None, Some(5), Some(3), Some(1), Some(-2)]);
    }

    #[test]
    fn an_aggregation_outside_a_group_by_or_of_text_says_so() {
        let text = group_by(&batch(), &[("k".into(), col("k"))], &[("s".into(), agg("sum", "k"))]).unwrap_err();
        assert_eq!(text, "`col(\"k\").sum()`: sum needs numbers, not Utf8");
        let bare = group_by(&batch(), &[("k".into(), col("k"))], &[("v".into(), col("v"))]).unwrap_err();
        assert!(bare.ends_with("an aggregation ends in len, count, sum, mean, min, max, first or last"), "{bare}");
        let outside = crate::expr::column(&agg("sum", "v"), &batch()).unwrap_err();
        assert!(outside.ends_with("sum is an aggregation: use it in group_by(…).agg(…)"), "{outside}");
    }
}
