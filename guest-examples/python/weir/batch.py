"""Record batches: a schema and one equally long Array per field.

A batch never changes: every method returns a new one, sharing the columns
it did not touch. A batch read from a frame and written unchanged goes out as
the bytes it came in.
"""
import datetime
import decimal

from . import types as t
from .array import Array, _checked


class RecordBatch:
    __slots__ = ("schema", "columns", "num_rows", "_raw", "_whole")

    def __init__(self, schema, columns, num_rows=None):
        columns = list(columns)
        if len(columns) != len(schema.fields):
            raise ValueError(f"a schema of {len(schema.fields)} fields needs as many columns, not {len(columns)}")
        num_rows = columns[0].length if num_rows is None and columns else (num_rows or 0)
        for f, c in zip(schema.fields, columns):
            if c.length != num_rows:
                raise ValueError(f"column {f.name!r} has {c.length} values, but the batch has {num_rows} rows")
        self.schema, self.columns, self.num_rows = schema, columns, num_rows
        self._raw = self._whole = None

    # Building --------------------------------------------------------------

    @staticmethod
    def from_pydict(mapping, schema=None):
        """A batch from {name: list of values or Array}. Types come from `schema`,
        from the Arrays, or are inferred from the values (int → int64,
        float → double, str → string, ...)."""
        fields, columns = [], []
        for name, values in mapping.items():
            given = schema.field(name) if schema is not None else None
            if isinstance(values, Array):
                array = values
            else:
                values = list(values)
                array = Array.from_pylist(values, given.type if given else infer_type(values, name))
            fields.append(given or t.Field(name, array.type, True))
            columns.append(array)
        return RecordBatch(t.Schema(fields, schema.metadata if schema else None), columns)

    @staticmethod
    def from_pylist(rows, schema=None):
        """A batch from a list of {column: value} rows."""
        rows = list(rows)
        names = schema.names if schema is not None else list(dict.fromkeys(k for r in rows for k in r))
        return RecordBatch.from_pydict({n: [r.get(n) for r in rows] for n in names}, schema)

    # Reading ---------------------------------------------------------------

    def __len__(self):
        return self.num_rows

    def __repr__(self):
        return f"<weir.RecordBatch {self.num_rows} rows\n{self.schema}>"

    @property
    def column_names(self):
        return self.schema.names

    def column(self, key):
        """The column named `key` (or at index `key`)."""
        return self.columns[key if isinstance(key, int) else self.schema.index(key)]

    __getitem__ = column

    def to_pydict(self):
        return {f.name: c.to_pylist() for f, c in zip(self.schema.fields, self.columns)}

    def to_pylist(self):
        """The rows, each a {column: value} dict."""
        names = self.schema.names
        return [dict(zip(names, row)) for row in zip(*(c.to_pylist() for c in self.columns))]

    rows = to_pylist

    # Changing --------------------------------------------------------------

    def _with(self, fields, columns):
        return RecordBatch(t.Schema(fields, self.schema.metadata), columns, self.num_rows if columns else 0)

    def filter(self, mask):
        """The rows where `mask` (bools or a bool Array, one per row) is true."""
        mask = mask.to_pylist() if isinstance(mask, Array) else list(mask)
        if len(mask) != self.num_rows:
            raise ValueError(f"the mask has {len(mask)} values, but the batch has {self.num_rows} rows")
        return self._take([i for i, keep in enumerate(mask) if keep])

    def take(self, indices):
        """The rows at `indices`, in that order."""
        return self._take(_checked(indices, self.num_rows))

    def _take(self, indices):
        # The indices are checked once for the batch, not once a column.
        return RecordBatch(self.schema, [c._take(indices) for c in self.columns], len(indices))

    def select(self, names):
        """Only the columns `names`, in that order."""
        return self._with([self.schema.field(n) for n in names], [self.column(n) for n in names])

    def drop(self, names):
        keep = [n for n in self.schema.names if n not in set(names)]
        return self.select(keep)

    def rename(self, mapping):
        """The columns renamed by {old: new}; every old name must be a column."""
        for old in mapping:
            self.schema.index(old)
        return self._with([f.with_name(mapping.get(f.name, f.name)) for f in self.schema.fields], self.columns)

    def set_column(self, name, values, type=None, after=None):
        """The batch with column `name` set to `values` (an Array, or values of
        `type`, inferred if not given): replaced where it is, else added after
        column `after` (or at the end)."""
        if not isinstance(values, Array):
            values = list(values)
            values = Array.from_pylist(values, type or infer_type(values, name))
        if values.length != self.num_rows:
            raise ValueError(f"column {name!r} has {values.length} values, but the batch has {self.num_rows} rows")
        field = t.Field(name, values.type, values.null_count > 0 or values.type.kind == "null")
        fields, columns = list(self.schema.fields), list(self.columns)
        if name in self.schema.names:
            at = self.schema.index(name)
            fields[at], columns[at] = field, values
        else:
            at = self.schema.index(after) + 1 if after is not None else len(fields)
            fields.insert(at, field)
            columns.insert(at, values)
        return self._with(fields, columns)

    def to_ipc(self):
        """This batch as one Arrow IPC stream."""
        from .ipc import write_stream

        return write_stream(self.schema, [self])


def infer_type(values, name="value"):
    """The Arrow type for a list of Python values, as pyarrow infers it."""
    sample = next((v for v in values if v is not None), None)
    if sample is None:
        return t.null()
    if isinstance(sample, bool):
        return t.bool_()
    if isinstance(sample, int):
        return t.int64()
    if isinstance(sample, float):
        return t.float64()
    if isinstance(sample, str):
        return t.string()
    if isinstance(sample, (bytes, bytearray, memoryview)):
        return t.binary()
    if isinstance(sample, datetime.datetime):
        return t.timestamp("us", "UTC" if sample.tzinfo is not None else None)
    if isinstance(sample, datetime.date):
        return t.date32()
    if isinstance(sample, datetime.time):
        return t.time64("us")
    if isinstance(sample, datetime.timedelta):
        return t.duration("us")
    if isinstance(sample, decimal.Decimal):
        return t.decimal128(38, max(-v.as_tuple().exponent for v in values if v is not None))
    if isinstance(sample, dict):
        names = list(dict.fromkeys(k for v in values if v is not None for k in v))
        return t.struct([t.Field(k, infer_type([v.get(k) for v in values if v is not None], k)) for k in names])
    if isinstance(sample, (list, tuple)):
        return t.list_(infer_type([x for v in values if v is not None for x in v]))
    raise TypeError(f"cannot tell the Arrow type of column {name!r} from a {type(sample).__name__}: give its type")
