"""Frames whose columns stay in weir's columnar kernels (compiled Rust on
arrow-rs, composed into the component by `weir plugin build`), worked on with
expressions shaped like Polars': each is built here and evaluated by the
kernels over every row in one call, so no row becomes a Python object.

    import weir
    from weir.frame import col, frames, when

    @weir.publisher
    def publish(slots):
        for frame in frames(slots[0]):
            kept = frame.filter(col("duration_ms") >= 100)
            weir.write(weir.tables()[0], kept.with_columns((col("duration_ms") / 1000).alias("duration_s")))

An expression that does not fit the frame (a column it lacks, types that do
not go together, a pattern that is no regular expression) raises ValueError
naming the expression, so the batch fails as invalid input:
`` `col("url") >= 100`: cannot compare Utf8 and Int64 ``.
"""
from builtins import len as _builtin_len

try:
    from wit_world.imports import kernels as _kernels
    from componentize_py_types import Err as _Err
except ImportError:  # outside a component: expressions are built, not evaluated
    _kernels = None
    _Err = None

__all__ = ["col", "lit", "when", "len", "concat", "frames", "from_dicts", "Expr", "Frame", "GroupBy", "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16",
           "UInt32", "UInt64", "Float32", "Float64", "String", "Utf8", "Boolean", "Date", "Datetime"]

# The types `cast` takes, by the names Polars gives them (`col("n").cast(Float64)`).
Int8, Int16, Int32, Int64 = "Int8", "Int16", "Int32", "Int64"
UInt8, UInt16, UInt32, UInt64 = "UInt8", "UInt16", "UInt32", "UInt64"
Float32, Float64, String, Utf8, Boolean = "Float32", "Float64", "String", "Utf8", "Boolean"
Date, Datetime = "Date", "Datetime"

_INT64 = (-(1 << 63), (1 << 63) - 1)


class Expr:
    """An expression over a frame's columns: `(col("a") >= 100) & col("b").is_not_null()`.
    Compare and combine with Python's operators (`==`, `<`, `&`, `|`, `~`, `+`, `/` …):
    `&` and `|` bind tighter than comparisons, so put comparisons in parentheses."""

    __slots__ = ("_nodes", "_name")

    def __init__(self, nodes, name=None):
        # Each node: ("column", name) | ("literal", value) | ("unary", op, i) |
        # ("binary", op, i, j) | ("call", name, [i, …]), operands before their users.
        self._nodes = nodes
        self._name = name

    def alias(self, name):
        """The same value, named: the column `with_columns` makes of it."""
        return Expr(self._nodes, name)

    @property
    def name(self):
        """The column it makes: its alias, else the column it starts from."""
        return self._name

    def __eq__(self, other):
        return self._binary("eq", other)

    def __ne__(self, other):
        return self._binary("ne", other)

    def __lt__(self, other):
        return self._binary("lt", other)

    def __le__(self, other):
        return self._binary("le", other)

    def __gt__(self, other):
        return self._binary("gt", other)

    def __ge__(self, other):
        return self._binary("ge", other)

    def __and__(self, other):
        """Kleene logic: null and false is false."""
        return self._binary("and", other)

    def __rand__(self, other):
        return _expr(other)._binary("and", self)

    def __or__(self, other):
        """Kleene logic: null or true is true."""
        return self._binary("or", other)

    def __ror__(self, other):
        return _expr(other)._binary("or", self)

    def __invert__(self):
        return self._unary("not")

    def __neg__(self):
        return self._unary("neg")

    def __add__(self, other):
        return self._binary("add", other)

    def __radd__(self, other):
        return _expr(other)._binary("add", self)

    def __sub__(self, other):
        return self._binary("sub", other)

    def __rsub__(self, other):
        return _expr(other)._binary("sub", self)

    def __mul__(self, other):
        return self._binary("mul", other)

    def __rmul__(self, other):
        return _expr(other)._binary("mul", self)

    def __truediv__(self, other):
        """True division, as Polars': integers divide as floats."""
        return self._binary("div", other)

    def __rtruediv__(self, other):
        return _expr(other)._binary("div", self)

    def __bool__(self):
        raise TypeError("an expression has no truth value until the kernels evaluate it: "
                        "combine conditions with & and | (in parentheses), not `and` / `or`")

    __hash__ = None

    def is_null(self):
        return self._unary("is-null")

    def is_not_null(self):
        return self._unary("is-not-null")

    def fill_null(self, value):
        """Where this is null, `value`'s value."""
        return _call("fill_null", self, value)

    def cast(self, dtype):
        """As another type: Polars' names ("Int64", "Float64", "String", "Boolean", "Date", "Datetime") or arrow's."""
        return _call("cast", self, dtype if isinstance(dtype, str) else getattr(dtype, "__name__", str(dtype)))

    # Aggregations, for `group_by(…).agg(…)`: each of a group's rows.
    def sum(self):
        """The sum of the group's values (0 for none; integers sum as int64)."""
        return _call("sum", self)

    def mean(self):
        return _call("mean", self)

    def min(self):
        return _call("min", self)

    def max(self):
        return _call("max", self)

    def count(self):
        """How many of the group's values are not null."""
        return _call("count", self)

    def first(self):
        return _call("first", self)

    def last(self):
        return _call("last", self)

    @property
    def str(self):
        """Text functions: `col("url").str.extract(r"^/*([^/?#]*)", 1)`."""
        return _Text(self)

    @property
    def dt(self):
        """Date and time functions: `col("ts").dt.truncate("1h")`."""
        return _Time(self)

    @property
    def struct(self):
        """Nested records' fields: `col("user").struct.field("id")` (named "id")."""
        return _Struct(self)

    @property
    def list(self):
        """List functions, of `str.split`'s lists: `col("path").str.split("/").list.get(1)`."""
        return _List(self)

    def _unary(self, op):
        return Expr(self._nodes + [("unary", op, _builtin_len(self._nodes) - 1)], self._name)

    def _binary(self, op, other):
        nodes, (a, b) = _joined([self, other])
        return Expr(nodes + [("binary", op, a, b)], self._name)

    def __repr__(self):
        return f"<weir.frame.Expr of {_builtin_len(self._nodes)} nodes{'' if self._name is None else ' named ' + self._name}>"


def col(name):
    """The column `name`."""
    return Expr([("column", name)], name)


def lit(value):
    """A literal: None, a bool, an int, a float or a str (an int is read as
    the other operand's type where it fits)."""
    if value is not None and not isinstance(value, (bool, int, float, str)):
        raise ValueError(f"lit({value!r}): a literal is None, a bool, an int, a float or a str")
    if isinstance(value, int) and not isinstance(value, bool) and not _INT64[0] <= value <= _INT64[1]:
        raise ValueError(f"lit({value}): an integer literal fits in 64 bits")
    return Expr([("literal", value)])


def _expr(value):
    return value if isinstance(value, Expr) else lit(value)


def _joined(operands):
    """The operands' nodes one after the other (each one's indices moved past
    those before), and where each one's value is."""
    nodes, at = [], []
    for operand in operands:
        base = _builtin_len(nodes)
        for node in _expr(operand)._nodes:
            kind = node[0]
            if kind == "unary":
                node = ("unary", node[1], node[2] + base)
            elif kind == "binary":
                node = ("binary", node[1], node[2] + base, node[3] + base)
            elif kind == "call":
                node = ("call", node[1], [i + base for i in node[2]])
            nodes.append(node)
        at.append(_builtin_len(nodes) - 1)
    return nodes, at


def _call(name, subject, *args):
    nodes, at = _joined([subject, *args])
    return Expr(nodes + [("call", name, at)], subject._name)


class _Text:
    """`col(…).str`: text functions, each keeping nulls null. Patterns are
    regular expressions (Rust's syntax, close to Python's `re`)."""

    __slots__ = ("_e",)

    def __init__(self, e):
        self._e = e

    def contains(self, pattern, literal=False):
        return _call("str.contains", self._e, pattern, literal)

    def starts_with(self, prefix):
        return _call("str.starts_with", self._e, prefix)

    def ends_with(self, suffix):
        return _call("str.ends_with", self._e, suffix)

    def extract(self, pattern, group_index=1):
        """Group `group_index` of `pattern`'s first match; null where it does not match."""
        return _call("str.extract", self._e, pattern, group_index)

    def replace(self, pattern, value, literal=False):
        """The first match of `pattern` replaced by `value` (`$1` is its first group unless `literal`)."""
        return _call("str.replace", self._e, pattern, value, literal)

    def replace_all(self, pattern, value, literal=False):
        return _call("str.replace_all", self._e, pattern, value, literal)

    def slice(self, offset, length=None):
        """`length` characters from `offset` (from the end when negative); to the end without `length`."""
        return _call("str.slice", self._e, offset, length)

    def to_lowercase(self):
        return _call("str.to_lowercase", self._e)

    def to_uppercase(self):
        return _call("str.to_uppercase", self._e)

    def strip_chars(self, characters=None):
        """Without leading and trailing whitespace, or the characters in `characters`."""
        return _call("str.strip_chars", self._e, characters)

    def len_chars(self):
        return _call("str.len_chars", self._e)

    def split(self, by):
        """The text cut at every `by` (plain text), as a list: `"a/b".split("/")` is `["a", "b"]`."""
        return _call("str.split", self._e, by)

    def len_bytes(self):
        return _call("str.len_bytes", self._e)


class _Time:
    """`col(…).dt`: parts of dates and times, and truncation to an interval."""

    __slots__ = ("_e",)

    def __init__(self, e):
        self._e = e

    def year(self):
        return _call("dt.year", self._e)

    def month(self):
        return _call("dt.month", self._e)

    def day(self):
        return _call("dt.day", self._e)

    def hour(self):
        return _call("dt.hour", self._e)

    def minute(self):
        return _call("dt.minute", self._e)

    def second(self):
        return _call("dt.second", self._e)

    def weekday(self):
        """1 (Monday) to 7 (Sunday)."""
        return _call("dt.weekday", self._e)

    def ordinal_day(self):
        return _call("dt.ordinal_day", self._e)

    def truncate(self, every):
        """Rounded down to a multiple of `every` since the epoch, in UTC: "1d", "6h", "15m", "30s", "500ms"."""
        return _call("dt.truncate", self._e, every)


class _Struct:
    """`expr.struct`: the fields of nested records (Avro, Protobuf, JSON objects)."""

    __slots__ = ("_e",)

    def __init__(self, e):
        self._e = e

    def field(self, name):
        """The field `name` of each record (null where the record is), named `name`."""
        return _call("struct.field", self._e, name).alias(name)


class _List:
    """`expr.list`: functions of list values (`str.split` makes them)."""

    __slots__ = ("_e",)

    def __init__(self, e):
        self._e = e

    def get(self, index, null_on_oob=False):
        """The item at `index` (from the end when negative). Out of a list's
        bounds it is an error, or null with `null_on_oob=True`."""
        return _call("list.get", self._e, index, null_on_oob)

    def len(self):
        """How many items the list holds."""
        return _call("list.len", self._e)


def when(condition):
    """`when(cond).then(a).otherwise(b)`: `a` where `cond` holds, `b` where it
    is false or null (null without `otherwise`); `.when(…).then(…)` chains more."""
    return _When([], condition)


class _When:
    __slots__ = ("_branches", "_condition")

    def __init__(self, branches, condition):
        self._branches, self._condition = branches, condition

    def then(self, value):
        return Then(self._branches + [(self._condition, value)])


class Then(Expr):
    """`when(…).then(…)`: an expression (null where no condition holds) until
    `otherwise` says what else."""

    __slots__ = ("_branches",)

    def __init__(self, branches):
        self._branches = branches
        chosen = self.otherwise(None)
        Expr.__init__(self, chosen._nodes, chosen._name)

    def when(self, condition):
        return _When(self._branches, condition)

    def otherwise(self, value):
        chosen = value
        for condition, then in reversed(self._branches):
            chosen = _call("when", _expr(condition), then, chosen)
        first = self._branches[0][1]
        return Expr(chosen._nodes, first._name if isinstance(first, Expr) else None)


def _kernel(work, *args):
    """A kernel's refusal (which names the expression) as ValueError: invalid input."""
    try:
        return work(*args)
    except _Err as e:
        raise ValueError(e.value) from None


_UNARY = {"not": "NOT", "is-null": "IS_NULL", "is-not-null": "IS_NOT_NULL", "neg": "NEG"}


def _wit(e):
    """`e` as the kernels' `expr`."""
    k = _kernels
    if k is None:
        raise RuntimeError("weir.frame evaluates expressions inside a component: build with `weir plugin build`")
    nodes = []
    for node in e._nodes:
        kind = node[0]
        if kind == "column":
            nodes.append(k.Node_Column(node[1]))
        elif kind == "literal":
            nodes.append(k.Node_Literal(_literal(node[1])))
        elif kind == "unary":
            nodes.append(k.Node_Unary((getattr(k.UnaryOp, _UNARY[node[1]]), node[2])))
        elif kind == "binary":
            nodes.append(k.Node_Binary((getattr(k.BinaryOp, node[1].upper()), node[2], node[3])))
        else:
            nodes.append(k.Node_Call((node[1], node[2])))
    return k.Expr(nodes)


def _literal(value):
    k = _kernels
    if value is None:
        return k.Literal_Null()
    if isinstance(value, bool):
        return k.Literal_Boolean(value)
    if isinstance(value, int):
        return k.Literal_Int(value)
    if isinstance(value, float):
        return k.Literal_Float(value)
    return k.Literal_Text(value)


def _named(exprs, named):
    columns = []
    for e in exprs:
        e = e if isinstance(e, Expr) else col(e)
        if e._name is None:
            raise ValueError(f"an expression that starts from no column ({_builtin_len(e._nodes)} nodes) has no name: "
                             "give it one with .alias(\"name\") or with_columns(name=expr)")
        columns.append((e._name, _wit(e)))
    columns.extend((name, _wit(_expr(e))) for name, e in named.items())
    return columns


def _names(names):
    """`select("a", "b")` and `select(["a", "b"])` alike."""
    if _builtin_len(names) == 1 and isinstance(names[0], (list, tuple)):
        return list(names[0])
    return list(names)


class Frame:
    """A table held by the kernels."""

    __slots__ = ("_kernel",)

    def __init__(self, kernel):
        self._kernel = kernel

    @staticmethod
    def from_ipc(data):
        """The frame an Arrow IPC stream holds."""
        return Frame(_kernel(_kernels.Frame.from_ipc, data))

    @property
    def height(self):
        """How many rows it has."""
        return self._kernel.num_rows()

    def __len__(self):
        return self.height

    @property
    def columns(self):
        """Its columns' names, in order."""
        return list(self._kernel.column_names())

    def filter(self, *predicates):
        """The rows where every predicate holds (null counts as false)."""
        if not predicates:
            return self
        predicate = predicates[0]
        for p in predicates[1:]:
            predicate = predicate & p
        return Frame(_kernel(self._kernel.filter, _wit(_expr(predicate))))

    def with_columns(self, *exprs, **named):
        """The frame with each expression added as a column (named by its alias,
        else by the column it starts from; `name=expr` names it too), or
        replacing the column of that name. All are of the frame as it was."""
        return Frame(_kernel(self._kernel.with_columns, _named(exprs, named)))

    def select(self, *names):
        """Only the columns named, in that order."""
        return Frame(_kernel(self._kernel.select, _names(names)))

    def rename(self, mapping):
        """The frame with columns renamed: `{"ts": "clicked_at"}`."""
        return Frame(_kernel(self._kernel.rename, list(mapping.items())))

    def sort(self, *by, descending=False):
        """The rows ordered by each key (a column's name or an expression) in
        turn, nulls first; `descending` for all keys or one flag per key."""
        keys = [col(k) if isinstance(k, str) else k for k in _names(by)]
        flags = descending if isinstance(descending, (list, tuple)) else [descending] * _builtin_len(keys)
        if _builtin_len(flags) != _builtin_len(keys):
            raise ValueError(f"sort: {_builtin_len(keys)} keys but {_builtin_len(flags)} descending flags")
        return Frame(_kernel(self._kernel.sort, [(_wit(k), bool(d)) for k, d in zip(keys, flags)]))

    def group_by(self, *keys):
        """`group_by("country").agg(len(), col("duration_ms").mean())`: one row
        per distinct key, in the order each first appears."""
        return GroupBy(self, [col(k) if isinstance(k, str) else k for k in _names(keys)])

    def drop(self, *names):
        """The frame without the columns named."""
        return Frame(_kernel(self._kernel.drop, _names(names)))

    def head(self, n=5):
        """Its first `n` rows (all but the last `-n` when negative)."""
        return self.slice(0, n if n >= 0 else max(self.height + n, 0))

    def tail(self, n=5):
        """Its last `n` rows (all but the first `-n` when negative)."""
        height = self.height
        n = n if n >= 0 else max(height + n, 0)
        return self.slice(max(height - n, 0))

    def slice(self, offset, length=None):
        """`length` rows from row `offset` (from the end when negative); to the end without `length`."""
        height = self.height
        offset = max(height + offset, 0) if offset < 0 else offset
        return Frame(self._kernel.slice(offset, height if length is None else max(length, 0)))

    def unique(self, subset=None):
        """The first row of each distinct value of `subset`'s columns (of all
        columns without it), in the order they first appear: Polars'
        `unique(subset, keep="first", maintain_order=True)`."""
        subset = [] if subset is None else [subset] if isinstance(subset, str) else list(subset)
        return Frame(_kernel(self._kernel.unique, subset))

    def with_row_index(self, name="index", offset=0):
        """The frame with a first column `name` numbering its rows from `offset` (UInt32)."""
        return Frame(_kernel(self._kernel.with_row_index, name, offset))

    def to_dicts(self):
        """Its rows as Python dicts, `{column: value}`: for what expressions cannot do (each row becomes Python objects)."""
        return self.rows(named=True)

    to_pylist = to_dicts

    def rows(self, named=False):
        """Its rows as tuples (as dicts when `named`)."""
        return list(self.iter_rows(named=named))

    def iter_rows(self, named=False):
        """Its rows one at a time, as tuples (as dicts when `named`)."""
        for batch in self._read()[1]:
            names = batch.column_names
            for values in zip(*(c.to_pylist() for c in batch.columns)):
                yield dict(zip(names, values)) if named else values

    def row(self, index, named=False):
        """Row `index` (from the end when negative), as a tuple (a dict when `named`)."""
        height = self.height
        at = height + index if index < 0 else index
        if not 0 <= at < height:
            raise IndexError(f"row {index} is out of a frame of {height} rows")
        return self.slice(at, 1).rows(named=named)[0]

    def to_batch(self):
        """Its rows as one `weir.RecordBatch`, the row-level API's."""
        from .batch import RecordBatch

        # The kernels write a frame as one batch; a stream of none is a frame of no rows.
        schema, batches = self._read()
        return batches[0] if batches else RecordBatch.from_pylist([], schema)

    def _read(self):
        from .ipc import read_stream

        return read_stream(self.to_ipc())

    def to_ipc(self):
        """The frame as an Arrow IPC stream (`weir.write` takes the frame itself, and sends it without this copy)."""
        return self._kernel.to_ipc()

    def write_to(self, table):
        """Appends its rows to output table `table`, straight from the kernels to the host: `weir.write(table, frame)`."""
        self._kernel.write(table)

    def __repr__(self):
        return f"<weir.frame.Frame of {self.height} rows: {', '.join(self.columns)}>"


class GroupBy:
    """A frame's rows by key, until `agg` says what to make of each group."""

    __slots__ = ("_frame", "_keys")

    def __init__(self, frame, keys):
        self._frame, self._keys = frame, keys

    def agg(self, *aggregations, **named):
        """One row per group: its keys, then each aggregation (`col("x").sum()`,
        `len()`, … named by alias, by the column it starts from, or `name=`)."""
        keys = _named(self._keys, {})
        return Frame(_kernel(self._frame._kernel.group_by, keys, _named(aggregations, named)))


def len():  # noqa: A001 (Polars' name)
    """How many rows a group has: `group_by(…).agg(len())`, named "len"."""
    return Expr([("call", "len", [])], "len")


def concat(frames):
    """The frames' rows one after the other (`pl.concat`): the same columns,
    by name and type, in the same order."""
    frames = list(frames)
    if not frames:
        raise ValueError("concat needs at least one frame")
    if _builtin_len(frames) == 1:
        return frames[0]
    return Frame(_kernel(_kernels.Frame.concat, [f._kernel for f in frames]))


def from_dicts(rows, schema=None):
    """A frame of rows made in Python (`{column: value}` dicts; the types
    inferred as pyarrow infers them, or given by a `weir.Schema`)."""
    from .batch import RecordBatch

    return Frame.from_ipc(RecordBatch.from_pylist(rows, schema).to_ipc())


def frames(slot):
    """Each frame of `slot`, read from the host straight into the kernels as it is reached."""
    if _kernels is None:
        raise RuntimeError("weir.frame evaluates expressions inside a component: build with `weir plugin build`")
    while (frame := _kernel(_kernels.Frame.read_next, slot._frames)) is not None:
        yield Frame(frame)
