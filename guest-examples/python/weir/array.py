"""Arrow arrays in pure Python: read in place from IPC bytes, turned into
Python values, built from Python values, filtered and taken.

An `Array` always starts at its buffers' first value (offset 0): what the
reader hands out points straight into the frame, and what filter, take and
from_pylist make is laid out afresh.
"""
import datetime
import decimal
import itertools
import struct

# memoryview/struct format of each fixed-width number, by (kind, bits, signed).
_FORMATS = {("int", 8, True): "b", ("int", 16, True): "h", ("int", 32, True): "i", ("int", 64, True): "q",
            ("int", 8, False): "B", ("int", 16, False): "H", ("int", 32, False): "I", ("int", 64, False): "Q",
            ("float", 16, True): "e", ("float", 32, True): "f", ("float", 64, True): "d"}
_BOOLS = [tuple(bool((b >> j) & 1) for j in range(8)) for b in range(256)]
_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_DATE = datetime.date(1970, 1, 1)
_PER_SECOND = {"s": 1, "ms": 1000, "us": 1000_000, "ns": 1000_000_000}
_UTC = datetime.timezone.utc


def unpack_bits(buf, n):
    """The first `n` bits of a bitmap, least significant bit first, as bools."""
    return [b for byte in bytes(buf[: (n + 7) // 8]) for b in _BOOLS[byte]][:n]


def pack_bits(bools):
    n = len(bools)
    if n == 0:
        return b""
    return int("".join("1" if b else "0" for b in reversed(bools)), 2).to_bytes((n + 7) // 8, "little")


def _number_format(dtype):
    if dtype.kind in ("int", "float"):
        return _FORMATS[(dtype.kind, dtype.bit_width, dtype.signed)]
    # Dates, times, timestamps and durations are stored as signed integers.
    return "i" if dtype.bit_width == 32 else "q"


def _numbers(buf, fmt, n):
    if not n:
        return []
    if fmt == "e":  # memoryview has no half floats
        return list(struct.unpack_from(f"<{n}e", buf))
    return memoryview(buf)[: n * struct.calcsize(fmt)].cast("B").cast(fmt).tolist()


class Array:
    """One column of values of type `type`.

    `buffers` are the type's buffers after the validity bitmap, as the Arrow
    format lays them out: values for fixed-width types, offsets and bytes for
    strings and binaries, offsets for lists, type ids (and offsets) for unions,
    none for structs. `validity` is None when every value is valid.
    """

    __slots__ = ("type", "length", "null_count", "validity", "buffers", "children", "dictionary")

    def __init__(self, type, length, null_count=0, validity=None, buffers=(), children=(), dictionary=None):
        self.type, self.length, self.null_count = type, length, null_count
        self.validity = validity if null_count else None
        self.buffers, self.children, self.dictionary = list(buffers), list(children), dictionary

    def __len__(self):
        return self.length

    def __repr__(self):
        values = self.to_pylist()
        shown = ", ".join(repr(v) for v in values[:10]) + (", ..." if len(values) > 10 else "")
        return f"<weir.Array {self.type} [{shown}]>"

    def __iter__(self):
        return iter(self.to_pylist())

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self.take(range(*i.indices(self.length)))
        return self.take([i]).to_pylist()[0]

    def is_valid(self):
        """Each value's validity, as bools."""
        if self.type.kind == "null":
            return [False] * self.length
        if self.validity is None:
            return [True] * self.length
        return unpack_bits(self.validity, self.length)

    # Python values -------------------------------------------------------

    def to_pylist(self):
        """The values as Python objects, as pyarrow's `to_pylist` gives them:
        int, float, bool, str, bytes, datetime, date, time, timedelta,
        Decimal, list, dict (struct), list of (key, value) tuples (map),
        the dictionary's value (dictionary), None for a null."""
        values = self._values()
        if self.validity is not None:
            values = [v if ok else None for v, ok in zip(values, unpack_bits(self.validity, self.length))]
        return values

    def _values(self):
        dtype, n, kind = self.type, self.length, self.type.kind
        if kind == "null":
            return [None] * n
        if kind == "bool":
            return unpack_bits(self.buffers[0], n)
        if kind in ("int", "float"):
            return _numbers(self.buffers[0], _number_format(dtype), n)
        if kind in ("string", "large_string", "binary", "large_binary"):
            offsets = _numbers(self.buffers[0], "i" if kind in ("string", "binary") else "q", n + 1)
            data = bytes(self.buffers[1][: offsets[-1]]) if n else b""
            if kind.endswith("string"):
                return [data[offsets[i] : offsets[i + 1]].decode() for i in range(n)]
            return [data[offsets[i] : offsets[i + 1]] for i in range(n)]
        if kind == "fixed_size_binary":
            w = dtype.byte_width
            data = bytes(self.buffers[0][: n * w])
            return [data[i * w : (i + 1) * w] for i in range(n)]
        if kind == "date":
            raw = _numbers(self.buffers[0], _number_format(dtype), n)
            if dtype.bit_width == 32:
                return [_EPOCH_DATE + datetime.timedelta(days=d) for d in raw]
            return [_EPOCH_DATE + datetime.timedelta(milliseconds=d) for d in raw]
        if kind == "timestamp":
            per = _PER_SECOND[dtype.unit]
            to_us = (lambda v: v * (1000_000 // per)) if per <= 1000_000 else (lambda v: v // (per // 1000_000))
            raw = _numbers(self.buffers[0], "q", n)
            if dtype.tz is None:
                return [_EPOCH + datetime.timedelta(microseconds=to_us(v)) for v in raw]
            return [(_EPOCH + datetime.timedelta(microseconds=to_us(v))).replace(tzinfo=_UTC) for v in raw]
        if kind == "time":
            per = _PER_SECOND[dtype.unit]
            out = []
            for v in _numbers(self.buffers[0], _number_format(dtype), n):
                us = v * 1000_000 // per
                out.append(datetime.time(us // 3600_000_000, us // 60_000_000 % 60, us // 1000_000 % 60, us % 1000_000))
            return out
        if kind == "duration":
            per = _PER_SECOND[dtype.unit]
            return [datetime.timedelta(microseconds=v * 1000_000 // per) for v in _numbers(self.buffers[0], "q", n)]
        if kind == "decimal":
            w, scale = dtype.byte_width, dtype.scale
            data = bytes(self.buffers[0][: n * w])
            return [decimal.Decimal(int.from_bytes(data[i * w : (i + 1) * w], "little", signed=True)).scaleb(-scale)
                    for i in range(n)]
        if kind == "interval":
            if dtype.unit == "month_day_nano":
                return [tuple(v) for v in struct.iter_unpack("<iiq", bytes(self.buffers[0][: 16 * n]))]
            if dtype.unit == "day_time":
                return [tuple(v) for v in struct.iter_unpack("<ii", bytes(self.buffers[0][: 8 * n]))]
            return _numbers(self.buffers[0], "i", n)
        if kind in ("list", "large_list", "map"):
            offsets = _numbers(self.buffers[0], "q" if kind == "large_list" else "i", n + 1)
            items = self.children[0].to_pylist()
            if kind == "map":
                items = [(e["key"], e["value"]) if e is not None else None for e in items]
            return [items[offsets[i] : offsets[i + 1]] for i in range(n)]
        if kind == "fixed_size_list":
            size, items = dtype.list_size, self.children[0].to_pylist()
            return [items[i * size : (i + 1) * size] for i in range(n)]
        if kind == "struct":
            names = [f.name for f in dtype.fields]
            columns = [c.to_pylist() for c in self.children]
            return [dict(zip(names, row)) for row in zip(*columns)] if columns else [{} for _ in range(n)]
        if kind == "dictionary":
            values, keys = self.dictionary.to_pylist(), _numbers(self.buffers[0], _number_format(dtype.index), n)
            # A null's key may be anything: it is not looked up.
            return [values[k] if ok else None for k, ok in zip(keys, self.is_valid())]
        if kind == "union":
            type_ids = _numbers(self.buffers[0], "b", n)
            child = {tid: c.to_pylist() for tid, c in zip(dtype.type_ids, self.children)}
            if dtype.mode == "dense":
                return [child[tid][o] for tid, o in zip(type_ids, _numbers(self.buffers[1], "i", n))]
            return [child[tid][i] for i, tid in enumerate(type_ids)]
        raise TypeError(f"weir's Python SDK cannot read {dtype} values")

    @staticmethod
    def from_pylist(values, type):
        """An array of `type` holding `values` (None for a null)."""
        return _build(list(values), type)

    # Selection -----------------------------------------------------------

    def filter(self, mask):
        """The values where `mask` (bools, or a bool Array) is true; a null mask entry drops the row."""
        mask = mask.to_pylist() if isinstance(mask, Array) else list(mask)
        if len(mask) != self.length:
            raise ValueError(f"the mask has {len(mask)} values, but the array has {self.length}")
        return self._take([i for i, keep in enumerate(mask) if keep])

    def take(self, indices):
        """The values at `indices`, in that order."""
        return self._take(_checked(indices, self.length))

    def _take(self, indices):
        """`take`, for a list of indices known to be in range."""
        n = len(indices)
        dtype, kind = self.type, self.type.kind
        valid = None if self.validity is None else unpack_bits(self.validity, self.length)
        if kind == "null":
            return Array(dtype, n, n)
        taken_valid = None if valid is None else [valid[i] for i in indices]
        nulls = 0 if taken_valid is None else taken_valid.count(False)
        validity = None if taken_valid is None else pack_bits(taken_valid)

        def made(buffers=(), children=(), dictionary=None):
            return Array(dtype, n, nulls, validity, buffers, children, dictionary)

        if kind == "bool":
            bits = unpack_bits(self.buffers[0], self.length)
            return made([pack_bits([bits[i] for i in indices])])
        width = dtype.byte_width
        if kind in ("int", "float", "date", "time", "timestamp", "duration") or (kind == "interval" and width <= 8):
            fmt = _number_format(dtype) if kind != "interval" else ("i" if width == 4 else "q")
            values = _numbers(self.buffers[0], fmt, self.length)
            return made([struct.pack(f"<{n}{fmt}", *[values[i] for i in indices])])
        if width:
            data = bytes(self.buffers[0][: self.length * width])
            return made([b"".join([data[i * width : (i + 1) * width] for i in indices])])
        if kind in ("string", "large_string", "binary", "large_binary"):
            fmt = "i" if kind in ("string", "binary") else "q"
            offsets = _numbers(self.buffers[0], fmt, self.length + 1)
            data = bytes(self.buffers[1][: offsets[-1]]) if self.length else b""
            pieces = [data[offsets[i] : offsets[i + 1]] for i in indices]
            return made([_offsets(list(map(len, pieces)), fmt), b"".join(pieces)])
        if kind in ("list", "large_list", "map"):
            fmt = "q" if kind == "large_list" else "i"
            offsets = _numbers(self.buffers[0], fmt, self.length + 1)
            child = [j for i in indices for j in range(offsets[i], offsets[i + 1])]
            lengths = [offsets[i + 1] - offsets[i] for i in indices]
            return made([_offsets(lengths, fmt)], [self.children[0]._take(child)])
        if kind == "fixed_size_list":
            size = dtype.list_size
            return made(children=[self.children[0]._take([i * size + j for i in indices for j in range(size)])])
        if kind == "struct":
            return made(children=[c._take(indices) for c in self.children])
        if kind == "dictionary":
            fmt = _number_format(dtype.index)
            keys = _numbers(self.buffers[0], fmt, self.length)
            return made([struct.pack(f"<{n}{fmt}", *[keys[i] for i in indices])], dictionary=self.dictionary)
        # Unions and anything else: through Python values.
        return Array.from_pylist([self._values()[i] if valid is None or valid[i] else None for i in indices], dtype)


def _checked(indices, length):
    """`indices` as a list, each checked to be a position in `length` values."""
    indices = list(indices)
    if indices and (min(indices) < 0 or max(indices) >= length):
        bad = next(i for i in indices if not 0 <= i < length)
        raise IndexError(f"index {bad} is out of range for an array of {length} values")
    return indices


def _offsets(lengths, fmt):
    return struct.pack(f"<{len(lengths) + 1}{fmt}", 0, *itertools.accumulate(lengths))


def _to_int(value, dtype):
    """A date, time, timestamp or duration value as the integer Arrow stores."""
    kind = dtype.kind
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "date":
        if isinstance(value, datetime.datetime):
            value = value.date()
        days = (value - _EPOCH_DATE).days
        return days if dtype.bit_width == 32 else days * 86_400_000
    per = _PER_SECOND[dtype.unit]
    if kind == "timestamp":
        if value.tzinfo is not None:
            value = value.astimezone(_UTC).replace(tzinfo=None)
        value = value - _EPOCH
    elif kind == "time":
        value = datetime.timedelta(hours=value.hour, minutes=value.minute, seconds=value.second, microseconds=value.microsecond)
    us = (value.days * 86_400 + value.seconds) * 1000_000 + value.microseconds
    return us * per // 1000_000


def _build(values, dtype):
    n, kind = len(values), dtype.kind
    valid = [v is not None for v in values]
    nulls = n - sum(valid)
    validity = pack_bits(valid) if nulls else None
    if kind == "null":
        return Array(dtype, n, n)

    def made(buffers=(), children=(), dictionary=None):
        return Array(dtype, n, nulls, validity, buffers, children, dictionary)

    if kind == "bool":
        return made([pack_bits([bool(v) for v in values])])
    if kind in ("int", "float"):
        fmt = _number_format(dtype)
        zero = 0 if kind == "int" else 0.0
        return made([struct.pack(f"<{n}{fmt}", *[zero if v is None else v for v in values])])
    if kind in ("date", "time", "timestamp", "duration"):
        fmt = _number_format(dtype)
        return made([struct.pack(f"<{n}{fmt}", *[0 if v is None else _to_int(v, dtype) for v in values])])
    if kind in ("string", "large_string", "binary", "large_binary"):
        text = kind.endswith("string")
        pieces = [b"" if v is None else (v.encode() if text else bytes(v)) for v in values]
        fmt = "i" if kind in ("string", "binary") else "q"
        return made([_offsets([len(p) for p in pieces], fmt), b"".join(pieces)])
    if kind == "fixed_size_binary":
        w = dtype.byte_width
        for v in values:
            if v is not None and len(v) != w:
                raise ValueError(f"{dtype} takes values of exactly {w} bytes, not {len(v)}")
        return made([b"".join(b"\0" * w if v is None else bytes(v) for v in values)])
    if kind == "decimal":
        w, scale = dtype.byte_width, dtype.scale
        raw = [0 if v is None else int(decimal.Decimal(v).scaleb(scale).to_integral_value()) for v in values]
        return made([b"".join(v.to_bytes(w, "little", signed=True) for v in raw)])
    if kind == "interval":
        if dtype.unit == "month_day_nano":
            return made([b"".join(struct.pack("<iiq", *((0, 0, 0) if v is None else v)) for v in values)])
        if dtype.unit == "day_time":
            return made([b"".join(struct.pack("<ii", *((0, 0) if v is None else v)) for v in values)])
        return made([struct.pack(f"<{n}i", *[0 if v is None else v for v in values])])
    if kind in ("list", "large_list", "map"):
        fmt = "q" if kind == "large_list" else "i"
        rows = [[] if v is None else (list(v.items()) if isinstance(v, dict) else list(v)) for v in values]
        items = [x for row in rows for x in row]
        if kind == "map":
            items = [{"key": k, "value": v} for k, v in items]
        return made([_offsets([len(r) for r in rows], fmt)], [_build(items, dtype.fields[0].type)])
    if kind == "fixed_size_list":
        size = dtype.list_size
        items = [x for v in values for x in ([None] * size if v is None else v)]
        return made(children=[_build(items, dtype.fields[0].type)])
    if kind == "struct":
        rows = [{} if v is None else v for v in values]
        return made(children=[_build([r.get(f.name) for r in rows], f.type) for f in dtype.fields])
    if kind == "dictionary":
        uniques, keys = {}, []
        for v in values:
            keys.append(0 if v is None else uniques.setdefault(v, len(uniques)))
        fmt = _number_format(dtype.index)
        return made([struct.pack(f"<{n}{fmt}", *keys)], dictionary=_build(list(uniques), dtype.value))
    raise TypeError(f"weir's Python SDK cannot build {dtype} values")
