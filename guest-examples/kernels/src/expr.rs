//! Expressions: evaluated over a frame's columns by arrow-rs's kernels, and
//! written back as text (`col("url") >= 100`) for the errors that name them.

use arrow_array::{
    Array, ArrayRef, BooleanArray, Datum, Float64Array, Int64Array, NullArray, RecordBatch, Scalar, StringArray,
    UInt32Array, cast::AsArray, new_null_array,
};
use arrow_cast::cast::{CastOptions, cast_with_options};
use arrow_schema::DataType;

use crate::exports::weir::frames::kernels::{BinaryOp, Expr, Literal, Node, UnaryOp};

/// A node's value: a column of the frame's length, or a literal's one value.
#[derive(Clone)]
pub enum Value {
    Array(ArrayRef),
    Scalar(ArrayRef),
}

impl Value {
    pub fn array(&self) -> &ArrayRef {
        match self {
            Value::Array(a) | Value::Scalar(a) => a,
        }
    }

    pub fn data_type(&self) -> &DataType {
        self.array().data_type()
    }

    fn is_scalar(&self) -> bool {
        matches!(self, Value::Scalar(_))
    }

    /// The same kind of value, of `array`.
    pub fn like(&self, array: ArrayRef) -> Value {
        match self {
            Value::Array(_) => Value::Array(array),
            Value::Scalar(_) => Value::Scalar(array),
        }
    }

    /// As many values as the frame has rows.
    pub fn broadcast(self, rows: usize) -> Result<ArrayRef, String> {
        match self {
            Value::Array(a) => Ok(a),
            Value::Scalar(s) if s.data_type() == &DataType::Null => Ok(new_null_array(&DataType::Null, rows)),
            Value::Scalar(s) => {
                arrow_select::take::take(&s, &UInt32Array::from(vec![0; rows]), None).map_err(|e| e.to_string())
            }
        }
    }
}

/// Calls `f` with both values as arrow-rs datums (a literal as a scalar).
pub fn datums<R>(l: &Value, r: &Value, f: impl FnOnce(&dyn Datum, &dyn Datum) -> R) -> R {
    let (ls, rs);
    let ld: &dyn Datum = match l {
        Value::Array(a) => a,
        Value::Scalar(s) => {
            ls = Scalar::new(s.clone());
            &ls
        }
    };
    let rd: &dyn Datum = match r {
        Value::Array(a) => a,
        Value::Scalar(s) => {
            rs = Scalar::new(s.clone());
            &rs
        }
    };
    f(ld, rd)
}

/// `expr`'s value over `batch` as a boolean mask, for a filter.
pub fn predicate(expr: &Expr, batch: &RecordBatch) -> Result<BooleanArray, String> {
    let value = evaluate(expr, batch)?;
    match value.data_type() {
        DataType::Boolean => Ok(value.broadcast(batch.num_rows())?.as_boolean().clone()),
        other => Err(format!("{}: a filter needs a boolean, not {other}", text(expr))),
    }
}

/// `expr`'s value over `batch`, one value a row.
pub fn column(expr: &Expr, batch: &RecordBatch) -> Result<ArrayRef, String> {
    evaluate(expr, batch)?.broadcast(batch.num_rows())
}

/// Why `name` is no column of `batch`.
/// A column as its values: a dictionary-encoded one (as Avro enums and
/// apache-arrow's text arrive) read as the plain array of its values, which
/// every kernel takes.
fn decoded(column: &ArrayRef) -> Result<ArrayRef, String> {
    match column.data_type() {
        DataType::Dictionary(_, values) => arrow_cast::cast(column, values).map_err(|e| e.to_string()),
        _ => Ok(column.clone()),
    }
}

pub fn no_column(name: &str, batch: &RecordBatch) -> String {
    let schema = batch.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    format!("the frame has no column `{name}` (its columns: {})", names.join(", "))
}

fn evaluate(expr: &Expr, batch: &RecordBatch) -> Result<Value, String> {
    if expr.nodes.is_empty() {
        return Err("an empty expression".into());
    }
    let fail = |problem: String| format!("{}: {problem}", text(expr));
    // A node the expression holds twice (`when(s == "").then("home").otherwise(s)`
    // holds `s` twice) is evaluated once: `value_of[node]` is where its value is.
    let mut values: Vec<Value> = Vec::with_capacity(expr.nodes.len());
    let mut value_of: Vec<usize> = Vec::with_capacity(expr.nodes.len());
    let mut seen: std::collections::HashMap<String, usize, rustc_hash::FxBuildHasher> = Default::default();
    for (at, node) in expr.nodes.iter().enumerate() {
        let index = |i: u32| match value_of.get(i as usize) {
            Some(&v) => Ok(v),
            None => Err(format!("a malformed expression: node {at} uses node {i}, which does not come before it")),
        };
        let node = match node {
            Node::Unary((op, a)) => Node::Unary((*op, index(*a)? as u32)),
            Node::Binary((op, a, b)) => Node::Binary((*op, index(*a)? as u32, index(*b)? as u32)),
            Node::Call((name, args)) => {
                Node::Call((name.clone(), args.iter().map(|&a| index(a).map(|i| i as u32)).collect::<Result<_, _>>()?))
            }
            other => other.clone(),
        };
        let key = format!("{node:?}");
        if let Some(&known) = seen.get(&key) {
            value_of.push(known);
            continue;
        }
        let operand = |i: u32| values[i as usize].clone();
        let value = match &node {
            Node::Column(name) => {
                let column = batch.column_by_name(name).ok_or_else(|| fail(no_column(name, batch)))?;
                Value::Array(decoded(column).map_err(fail)?)
            }
            Node::Literal(literal) => Value::Scalar(literal_array(literal)),
            Node::Unary((op, a)) => unary(*op, operand(*a)).map_err(fail)?,
            Node::Binary((op, a, b)) => binary(*op, operand(*a), operand(*b)).map_err(fail)?,
            Node::Call((name, args)) => {
                let args: Vec<Value> = args.iter().map(|&a| operand(a)).collect();
                crate::call::call(name, &args, batch.num_rows()).map_err(fail)?
            }
        };
        seen.insert(key, values.len());
        value_of.push(values.len());
        values.push(value);
    }
    let last = *value_of.last().expect("at least one node");
    Ok(values.swap_remove(last))
}

fn literal_array(literal: &Literal) -> ArrayRef {
    match literal {
        Literal::Null => std::sync::Arc::new(NullArray::new(1)),
        Literal::Boolean(b) => std::sync::Arc::new(BooleanArray::from(vec![*b])),
        Literal::Int(i) => std::sync::Arc::new(Int64Array::from(vec![*i])),
        Literal::Float(f) => std::sync::Arc::new(Float64Array::from(vec![*f])),
        Literal::Text(s) => std::sync::Arc::new(StringArray::from(vec![s.as_str()])),
    }
}

fn unary(op: UnaryOp, a: Value) -> Result<Value, String> {
    let array = a.array();
    let result: ArrayRef = match op {
        UnaryOp::Not => match array.as_boolean_opt() {
            Some(b) => std::sync::Arc::new(arrow_arith::boolean::not(b).map_err(|e| e.to_string())?),
            None => return Err(format!("not needs a boolean, not {}", array.data_type())),
        },
        UnaryOp::IsNull => std::sync::Arc::new(arrow_arith::boolean::is_null(array).map_err(|e| e.to_string())?),
        UnaryOp::IsNotNull => std::sync::Arc::new(arrow_arith::boolean::is_not_null(array).map_err(|e| e.to_string())?),
        UnaryOp::Neg => arrow_arith::numeric::neg(array).map_err(|e| e.to_string())?,
    };
    Ok(a.like(result))
}

fn binary(op: BinaryOp, l: Value, r: Value) -> Result<Value, String> {
    let scalar = l.is_scalar() && r.is_scalar();
    let wrap = |array: ArrayRef| if scalar { Value::Scalar(array) } else { Value::Array(array) };
    if matches!(op, BinaryOp::And | BinaryOp::Or) {
        let rows = l.array().len().max(r.array().len());
        let (l, r) = (boolean(l, rows)?, boolean(r, rows)?);
        let result = match op {
            BinaryOp::And => arrow_arith::boolean::and_kleene(&l, &r),
            _ => arrow_arith::boolean::or_kleene(&l, &r),
        };
        return Ok(wrap(std::sync::Arc::new(result.map_err(|e| e.to_string())?)));
    }
    let verb = match op {
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => "do arithmetic on",
        _ => "compare",
    };
    let (l, r) = coerce(l, r, verb)?;
    // Division is true division, as in Polars: integers divide as floats.
    let (l, r) = match op {
        BinaryOp::Div if l.data_type().is_integer() => (to_float(&l)?, to_float(&r)?),
        _ => (l, r),
    };
    let result: Result<ArrayRef, _> = datums(&l, &r, |a, b| match op {
        BinaryOp::Eq => arrow_ord::cmp::eq(a, b).map(|m| std::sync::Arc::new(m) as ArrayRef),
        BinaryOp::Ne => arrow_ord::cmp::neq(a, b).map(|m| std::sync::Arc::new(m) as ArrayRef),
        BinaryOp::Lt => arrow_ord::cmp::lt(a, b).map(|m| std::sync::Arc::new(m) as ArrayRef),
        BinaryOp::Le => arrow_ord::cmp::lt_eq(a, b).map(|m| std::sync::Arc::new(m) as ArrayRef),
        BinaryOp::Gt => arrow_ord::cmp::gt(a, b).map(|m| std::sync::Arc::new(m) as ArrayRef),
        BinaryOp::Ge => arrow_ord::cmp::gt_eq(a, b).map(|m| std::sync::Arc::new(m) as ArrayRef),
        BinaryOp::Add => arrow_arith::numeric::add(a, b),
        BinaryOp::Sub => arrow_arith::numeric::sub(a, b),
        BinaryOp::Mul => arrow_arith::numeric::mul(a, b),
        BinaryOp::Div => arrow_arith::numeric::div(a, b),
        BinaryOp::And | BinaryOp::Or => unreachable!("boolean logic is above"),
    });
    Ok(wrap(result.map_err(|e| e.to_string())?))
}

/// A boolean operand of `and` / `or`, as many values as the other's.
fn boolean(v: Value, rows: usize) -> Result<BooleanArray, String> {
    let v = match v.data_type() {
        DataType::Null => Value::Scalar(new_null_array(&DataType::Boolean, 1)),
        DataType::Boolean => v,
        other => return Err(format!("and / or need booleans, not {other}")),
    };
    Ok(v.broadcast(rows)?.as_boolean().clone())
}

/// The two operands of `op`, of one type: a literal takes the column's type
/// where its value fits (`col("id") > 5` on an int32 column; a text literal
/// against a timestamp is read as one), numbers of different types meet at
/// int64 or float64, and anything else does not fit together (what `verb`,
/// `compare` or `do arithmetic on`, says in the error).
pub fn coerce(l: Value, r: Value, verb: &str) -> Result<(Value, Value), String> {
    let (lt, rt) = (l.data_type().clone(), r.data_type().clone());
    if lt == rt {
        return Ok((l, r));
    }
    let strict = CastOptions { safe: false, ..Default::default() };
    let cast = |v: &Value, to: &DataType| cast_with_options(v.array(), to, &strict).map(|a| v.like(a));
    if r.is_scalar() && (rt == DataType::Null || fits(&rt, &lt)) {
        if let Ok(r) = cast(&r, &lt) {
            return Ok((l, r));
        }
    }
    if l.is_scalar() && (lt == DataType::Null || fits(&lt, &rt)) {
        if let Ok(l) = cast(&l, &rt) {
            return Ok((l, r));
        }
    }
    if let Some(to) = common_number(&lt, &rt) {
        let widened = cast(&l, &to).and_then(|l| Ok((l, cast(&r, &to)?)));
        return widened.map_err(|e| e.to_string());
    }
    Err(format!("cannot {verb} {lt} and {rt}"))
}

/// Whether a literal of type `from` may be read as `to`: an integer as any
/// number, a float as a float, text as a time or date.
fn fits(from: &DataType, to: &DataType) -> bool {
    (from.is_integer() && to.is_numeric())
        || (from.is_floating() && to.is_floating())
        || (from == &DataType::Utf8 && to.is_temporal())
}

fn to_float(v: &Value) -> Result<Value, String> {
    cast_with_options(v.array(), &DataType::Float64, &CastOptions::default())
        .map(|a| v.like(a))
        .map_err(|e| e.to_string())
}

fn common_number(a: &DataType, b: &DataType) -> Option<DataType> {
    match (a.is_numeric(), b.is_numeric()) {
        (true, true) if a.is_floating() || b.is_floating() => Some(DataType::Float64),
        (true, true) if a.is_integer() && b.is_integer() => Some(DataType::Int64),
        _ => None,
    }
}

/// `expr` as an expression's text: `(col("duration_ms") >= 100) & col("url").is_not_null()`.
pub fn text(expr: &Expr) -> String {
    let mut texts: Vec<String> = Vec::with_capacity(expr.nodes.len());
    for node in &expr.nodes {
        let of = |i: u32| texts.get(i as usize).cloned().unwrap_or_else(|| "?".into());
        let text = match node {
            Node::Column(name) => format!("col({name:?})"),
            Node::Literal(Literal::Null) => "null".into(),
            Node::Literal(Literal::Boolean(b)) => b.to_string(),
            Node::Literal(Literal::Int(i)) => i.to_string(),
            Node::Literal(Literal::Float(f)) => format!("{f:?}"),
            Node::Literal(Literal::Text(s)) => format!("{s:?}"),
            Node::Unary((op, a)) => match op {
                UnaryOp::Not => format!("~{}", of(*a)),
                UnaryOp::IsNull => format!("{}.is_null()", of(*a)),
                UnaryOp::IsNotNull => format!("{}.is_not_null()", of(*a)),
                UnaryOp::Neg => format!("-{}", of(*a)),
            },
            Node::Binary((op, a, b)) => {
                let symbol = match op {
                    BinaryOp::Eq => "==",
                    BinaryOp::Ne => "!=",
                    BinaryOp::Lt => "<",
                    BinaryOp::Le => "<=",
                    BinaryOp::Gt => ">",
                    BinaryOp::Ge => ">=",
                    BinaryOp::And => "&",
                    BinaryOp::Or => "|",
                    BinaryOp::Add => "+",
                    BinaryOp::Sub => "-",
                    BinaryOp::Mul => "*",
                    BinaryOp::Div => "/",
                };
                format!("({} {symbol} {})", of(*a), of(*b))
            }
            Node::Call((name, args)) => {
                let args: Vec<String> = args.iter().map(|&a| of(a)).collect();
                match (name.as_str(), args.as_slice()) {
                    ("when", [c, t, o]) => format!("when({c}).then({t}).otherwise({o})"),
                    (_, [subject, rest @ ..]) => format!("{subject}.{name}({})", rest.join(", ")),
                    (_, []) => format!("{name}()"),
                }
            }
        };
        texts.push(text);
    }
    let whole = texts.pop().unwrap_or_default();
    // The outermost parentheses say nothing.
    match whole.strip_prefix('(').and_then(|t| t.strip_suffix(')')) {
        Some(inner) if matches!(expr.nodes.last(), Some(Node::Binary(_))) => format!("`{inner}`"),
        _ => format!("`{whole}`"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::types::Int32Type;
    use arrow_array::{DictionaryArray, Int32Array, TimestampMicrosecondArray};
    use arrow_schema::{Field, Schema, TimeUnit};

    use super::*;

    fn batch() -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("n", DataType::Int32, true),
            Field::new("b", DataType::Boolean, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("t", DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())), false),
            Field::new("d", DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)), true),
        ]);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![Some(1), None, Some(250), Some(-4)])),
            Arc::new(BooleanArray::from(vec![Some(true), None, Some(false), None])),
            Arc::new(StringArray::from(vec![Some("a"), Some("b"), None, Some("d")])),
            Arc::new(
                TimestampMicrosecondArray::from(vec![0, 86_400_000_000, 2 * 86_400_000_000, 3 * 86_400_000_000])
                    .with_timezone("+00:00"),
            ),
            Arc::new(DictionaryArray::<Int32Type>::from_iter([Some("x/1"), Some("y/2"), Some("x/1"), None])),
        ];
        RecordBatch::try_new(Arc::new(schema), columns).unwrap()
    }

    fn col(name: &str) -> Vec<Node> {
        vec![Node::Column(name.into())]
    }

    fn lit(literal: Literal) -> Vec<Node> {
        vec![Node::Literal(literal)]
    }

    fn bin(op: BinaryOp, a: Vec<Node>, b: Vec<Node>) -> Vec<Node> {
        let (mut nodes, at) = joined(vec![a, b]);
        nodes.push(Node::Binary((op, at[0], at[1])));
        nodes
    }

    /// The operands' nodes one after the other, and where each operand's value is.
    fn joined(operands: Vec<Vec<Node>>) -> (Vec<Node>, Vec<u32>) {
        let (mut nodes, mut at) = (Vec::new(), Vec::new());
        for operand in operands {
            let base = nodes.len() as u32;
            nodes.extend(operand.into_iter().map(|n| match n {
                Node::Unary((op, x)) => Node::Unary((op, x + base)),
                Node::Binary((op, x, y)) => Node::Binary((op, x + base, y + base)),
                Node::Call((name, args)) => Node::Call((name, args.into_iter().map(|a| a + base).collect())),
                n => n,
            }));
            at.push(nodes.len() as u32 - 1);
        }
        (nodes, at)
    }

    fn call(name: &str, operands: Vec<Vec<Node>>) -> Vec<Node> {
        let (mut nodes, at) = joined(operands);
        nodes.push(Node::Call((name.into(), at)));
        nodes
    }

    fn text_lit(s: &str) -> Vec<Node> {
        lit(Literal::Text(s.into()))
    }

    fn texts(nodes: Vec<Node>) -> Vec<Option<String>> {
        let v = column(&Expr { nodes }, &batch()).unwrap();
        v.as_string::<i32>().iter().map(|s| s.map(str::to_string)).collect()
    }

    fn un(op: UnaryOp, mut a: Vec<Node>) -> Vec<Node> {
        let last = a.len() as u32 - 1;
        a.push(Node::Unary((op, last)));
        a
    }

    fn mask(nodes: Vec<Node>) -> Vec<bool> {
        let m = predicate(&Expr { nodes }, &batch()).unwrap();
        (0..m.len()).map(|i| m.is_valid(i) && m.value(i)).collect()
    }

    fn error(nodes: Vec<Node>) -> String {
        column(&Expr { nodes }, &batch()).unwrap_err()
    }

    #[test]
    fn a_structs_field_is_null_where_the_record_is() {
        let ids = Arc::new(Int32Array::from(vec![Some(1), Some(2), None])) as ArrayRef;
        let user = arrow_array::StructArray::try_new(
            vec![Field::new("id", DataType::Int32, true)].into(),
            vec![ids],
            Some(vec![true, false, true].into()),
        )
        .unwrap();
        let schema = Schema::new(vec![Field::new("user", user.data_type().clone(), true)]);
        let batch = RecordBatch::try_new(Arc::new(schema), vec![Arc::new(user)]).unwrap();
        let field = |name: &str| Expr { nodes: call("struct.field", vec![col("user"), text_lit(name)]) };
        let id = column(&field("id"), &batch).unwrap();
        let id: Vec<Option<i32>> = id.as_primitive::<arrow_array::types::Int32Type>().iter().collect();
        assert_eq!(id, [Some(1), None, None]);
        let missing = column(&field("nope"), &batch).unwrap_err();
        assert!(missing.ends_with("the struct has no field `nope` (its fields: id)"), "{missing}");
        let not_a_struct = error(call("struct.field", vec![col("n"), text_lit("id")]));
        assert!(not_a_struct.ends_with("struct.field needs a struct (a nested record), not Int32"), "{not_a_struct}");
    }

    #[test]
    fn a_dictionary_encoded_column_is_read_as_its_values() {
        assert_eq!(mask(bin(BinaryOp::Eq, col("d"), text_lit("x/1"))), [true, false, true, false]);
        let second = call("list.get", vec![call("str.split", vec![col("d"), text_lit("/")]), lit(Literal::Int(-1))]);
        assert_eq!(texts(second), [Some("1".into()), Some("2".into()), Some("1".into()), None]);
        let parts =
            column(&Expr { nodes: call("list.len", vec![call("str.split", vec![col("d"), text_lit("/")])]) }, &batch());
        let parts: Vec<Option<u32>> = parts.unwrap().as_primitive::<arrow_array::types::UInt32Type>().iter().collect();
        assert_eq!(parts, [Some(2), Some(2), Some(2), None]);
        let out_of_bounds =
            error(call("list.get", vec![call("str.split", vec![col("s"), text_lit("/")]), lit(Literal::Int(1))]));
        assert!(
            out_of_bounds
                .ends_with("index 1 is out of bounds for a list of 1 (row 0): pass null_on_oob=True for null there"),
            "{out_of_bounds}"
        );
    }

    #[test]
    fn an_int_literal_compares_with_an_int32_column_and_nulls_are_not_kept() {
        assert_eq!(mask(bin(BinaryOp::Ge, col("n"), lit(Literal::Int(1)))), [true, false, true, false]);
        assert_eq!(mask(bin(BinaryOp::Lt, col("n"), lit(Literal::Float(1.5)))), [true, false, false, true]);
    }

    #[test]
    fn boolean_logic_is_kleenes() {
        // null & false is false, null | true is true; a null mask value drops the row.
        let and = bin(BinaryOp::And, col("b"), lit(Literal::Boolean(false)));
        let m = predicate(&Expr { nodes: and }, &batch()).unwrap();
        assert_eq!(m, BooleanArray::from(vec![Some(false), Some(false), Some(false), Some(false)]));
        let or = bin(BinaryOp::Or, col("b"), lit(Literal::Boolean(true)));
        assert_eq!(mask(or), [true, true, true, true]);
        assert_eq!(mask(un(UnaryOp::Not, col("b"))), [false, false, true, false]);
        assert_eq!(mask(un(UnaryOp::IsNull, col("s"))), [false, false, true, false]);
    }

    #[test]
    fn text_against_a_timestamp_is_read_as_one() {
        let since = bin(BinaryOp::Ge, col("t"), lit(Literal::Text("1970-01-02T00:00:00Z".into())));
        assert_eq!(mask(since), [false, true, true, true]);
        assert_eq!(
            error(bin(BinaryOp::Ge, col("t"), lit(Literal::Text("yesterday".into())))),
            "`col(\"t\") >= \"yesterday\"`: cannot compare Timestamp(µs, \"+00:00\") and Utf8"
        );
    }

    #[test]
    fn integers_divide_as_floats_and_arithmetic_keeps_nulls() {
        let half = column(&Expr { nodes: bin(BinaryOp::Div, col("n"), lit(Literal::Int(2))) }, &batch()).unwrap();
        assert_eq!(
            half.as_primitive::<arrow_array::types::Float64Type>(),
            &Float64Array::from(vec![Some(0.5), None, Some(125.0), Some(-2.0)])
        );
        let sum = column(&Expr { nodes: bin(BinaryOp::Add, col("n"), col("n")) }, &batch()).unwrap();
        assert_eq!(
            sum.as_primitive::<arrow_array::types::Int32Type>(),
            &Int32Array::from(vec![Some(2), None, Some(500), Some(-8)])
        );
    }

    #[test]
    fn a_literal_alone_is_one_value_a_row() {
        let ones = column(&Expr { nodes: lit(Literal::Int(1)) }, &batch()).unwrap();
        assert_eq!(ones.len(), 4);
        assert_eq!(column(&Expr { nodes: lit(Literal::Null) }, &batch()).unwrap().logical_null_count(), 4);
    }

    #[test]
    fn errors_name_the_expression_and_what_is_wrong() {
        assert_eq!(
            error(bin(BinaryOp::Ge, col("s"), lit(Literal::Int(100)))),
            "`col(\"s\") >= 100`: cannot compare Utf8 and Int64"
        );
        assert_eq!(
            error(bin(BinaryOp::Add, col("missing"), lit(Literal::Int(1)))),
            "`col(\"missing\") + 1`: the frame has no column `missing` (its columns: n, b, s, t, d)"
        );
        assert_eq!(error(un(UnaryOp::Not, col("n"))), "`~col(\"n\")`: not needs a boolean, not Int32");
        let filter = predicate(&Expr { nodes: col("n") }, &batch()).unwrap_err();
        assert_eq!(filter, "`col(\"n\")`: a filter needs a boolean, not Int32");
        let malformed = Expr { nodes: vec![Node::Unary((UnaryOp::Not, 0))] };
        assert!(column(&malformed, &batch()).unwrap_err().contains("node 0 uses node 0"));
        assert_eq!(column(&Expr { nodes: vec![] }, &batch()).unwrap_err(), "an empty expression");
    }

    #[test]
    fn when_then_otherwise_takes_otherwise_where_the_condition_is_false_or_null() {
        let n_big = bin(BinaryOp::Gt, col("n"), lit(Literal::Int(100)));
        let chosen = call("when", vec![n_big, text_lit("big"), col("s")]);
        assert_eq!(texts(chosen), [Some("a".into()), Some("b".into()), Some("big".into()), Some("d".into())]);
        // Without otherwise (a null literal): null where the condition does not hold.
        let only = call("when", vec![col("b"), col("n"), lit(Literal::Null)]);
        let v = column(&Expr { nodes: only }, &batch()).unwrap();
        assert_eq!(
            v.as_primitive::<arrow_array::types::Int32Type>(),
            &Int32Array::from(vec![Some(1), None, None, None])
        );
    }

    #[test]
    fn fill_null_and_cast() {
        let filled = call("fill_null", vec![col("s"), text_lit("?")]);
        assert_eq!(texts(filled), [Some("a".into()), Some("b".into()), Some("?".into()), Some("d".into())]);
        let as_text = call("cast", vec![col("n"), text_lit("String")]);
        assert_eq!(texts(as_text), [Some("1".into()), None, Some("250".into()), Some("-4".into())]);
        let bad = call("cast", vec![col("s"), text_lit("Int64")]);
        assert!(error(bad).starts_with("`col(\"s\").cast(\"Int64\")`: cannot cast: "));
        assert_eq!(
            error(call("cast", vec![col("n"), text_lit("Int65")])),
            "`col(\"n\").cast(\"Int65\")`: no type \"Int65\" (Int64, Float64, String, Boolean, Date, Datetime …)"
        );
    }

    #[test]
    fn text_functions_keep_nulls_and_regexes_are_checked() {
        let url = || {
            let schema = Schema::new(vec![Field::new("url", DataType::Utf8, true)]);
            let urls =
                StringArray::from(vec![Some("/docs/quick?x=1"), Some("/"), None, Some("//Blog#top"), Some("?q")]);
            RecordBatch::try_new(Arc::new(schema), vec![Arc::new(urls)]).unwrap()
        };
        let run = |nodes: Vec<Node>| -> Vec<Option<String>> {
            let v = column(&Expr { nodes }, &url()).unwrap();
            v.as_string::<i32>().iter().map(|s| s.map(str::to_string)).collect()
        };
        let section = call("str.extract", vec![col("url"), text_lit("^/*([^/?#]*)"), lit(Literal::Int(1))]);
        let some = |s: &str| Some(s.to_string());
        assert_eq!(run(section.clone()), [some("docs"), some(""), None, some("Blog"), some("")]);
        assert_eq!(
            run(call("str.to_lowercase", vec![section])),
            [some("docs"), some(""), None, some("blog"), some("")]
        );
        let replaced =
            call("str.replace_all", vec![col("url"), text_lit("/"), text_lit("$"), lit(Literal::Boolean(true))]);
        assert_eq!(run(replaced), [some("$docs$quick?x=1"), some("$"), None, some("$$Blog#top"), some("?q")]);
        let groups = call("str.replace", vec![col("url"), text_lit("^/+(\\w+)"), text_lit("<$1>")]);
        assert_eq!(run(groups), [some("<docs>/quick?x=1"), some("/"), None, some("<Blog>#top"), some("?q")]);
        assert_eq!(
            run(call("str.slice", vec![col("url"), lit(Literal::Int(1)), lit(Literal::Int(4))]))[0],
            some("docs")
        );
        let contains = call("str.contains", vec![col("url"), text_lit("[?#]")]);
        let m = column(&Expr { nodes: contains }, &url()).unwrap();
        assert_eq!(m.as_boolean(), &BooleanArray::from(vec![Some(true), Some(false), None, Some(true), Some(true)]));
        let bad = column(&Expr { nodes: call("str.contains", vec![col("url"), text_lit("(")]) }, &url()).unwrap_err();
        assert!(
            bad.starts_with("`col(\"url\").str.contains(\"(\")`: the pattern \"(\" is not a regular expression"),
            "{bad}"
        );
        let huge = column(&Expr { nodes: call("str.contains", vec![col("url"), text_lit("(\\w{100}){100}")]) }, &url());
        assert!(huge.unwrap_err().contains("compiles to more than 1048576 bytes: simplify it"));
        let group =
            column(&Expr { nodes: call("str.extract", vec![col("url"), text_lit("a"), lit(Literal::Int(1))]) }, &url());
        assert!(group.unwrap_err().ends_with("the pattern has no group 1 (it has 0)"));
    }

    #[test]
    fn time_parts_and_truncation() {
        let day = call("dt.day", vec![col("t")]);
        let v = column(&Expr { nodes: day }, &batch()).unwrap();
        assert_eq!(v.as_primitive::<arrow_array::types::Int32Type>(), &Int32Array::from(vec![1, 2, 3, 4]));
        let two_days = call("dt.truncate", vec![col("t"), text_lit("2d")]);
        let v = column(&Expr { nodes: two_days }, &batch()).unwrap();
        let d = 86_400_000_000;
        let want = TimestampMicrosecondArray::from(vec![0, 0, 2 * d, 2 * d]).with_timezone("+00:00");
        assert_eq!(v.as_primitive::<arrow_array::types::TimestampMicrosecondType>(), &want);
        assert_eq!(
            error(call("dt.truncate", vec![col("t"), text_lit("1 day")])),
            "`col(\"t\").dt.truncate(\"1 day\")`: \"1 day\" is no interval: write a count and a unit, w, d, h, m, s, ms or us (`1h`, `15m`)"
        );
        assert!(error(call("dt.year", vec![col("s")])).ends_with("dt.year needs a date or a time, not Utf8"));
        assert!(error(call("str.nope", vec![col("s")])).contains("no function str.nope (there are when, fill_null"));
        assert_eq!(error(call("when", vec![col("b")])), "`col(\"b\").when()`: when takes 3 operands, not 1");
    }
}
