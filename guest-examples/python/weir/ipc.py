"""Arrow IPC streams (the format's "encapsulated messages"), read and written in pure Python.

A stream is a schema message, then dictionary and record batch messages, then
an end-of-stream marker. Each message is a continuation marker, the length of
its FlatBuffers metadata, the metadata, and a body holding the buffers.
"""
import struct

from . import _flatbuf as fb
from . import types as t
from .array import Array

_CONTINUATION = b"\xff\xff\xff\xff"
_END = _CONTINUATION + b"\0\0\0\0"
_V5 = 4
_SCHEMA, _DICTIONARY, _RECORD_BATCH = 1, 2, 3
_UNITS = ["s", "ms", "us", "ns"]
_INTERVALS = ["year_month", "day_time", "month_day_nano"]

# The Type union's members, by id.
_TYPE_IDS = {"null": 1, "int": 2, "float": 3, "binary": 4, "string": 5, "bool": 6, "decimal": 7, "date": 8,
             "time": 9, "timestamp": 10, "interval": 11, "list": 12, "struct": 13, "union": 14,
             "fixed_size_binary": 15, "fixed_size_list": 16, "map": 17, "duration": 18, "large_binary": 19,
             "large_string": 20, "large_list": 21}
_TYPE_NAMES = {v: k for k, v in _TYPE_IDS.items()}
_UNSUPPORTED = {22: "run-end encoded", 23: "binary view", 24: "string view", 25: "list view", 26: "large list view"}


class IpcError(ValueError):
    pass


# Reading ---------------------------------------------------------------


def _messages(data):
    """(flatbuffer Message, body memoryview, raw message memoryview) for each message of a stream."""
    view, at = memoryview(data), 0
    while at + 4 <= len(view):
        start = at
        if view[at : at + 4] == _CONTINUATION:
            at += 4
        size = struct.unpack_from("<i", view, at)[0]
        at += 4
        if size == 0:
            return
        if size < 0 or at + size > len(view):
            raise IpcError("the bytes are not an Arrow IPC stream: a message's length runs past the end")
        message = fb.Table.root(view[at : at + size])
        body_len = message.scalar(3, "q")
        body = view[at + size : at + size + body_len]
        at += size + body_len
        yield message, body, view[start:at]


def _key_values(table, index):
    return {kv.string(0): kv.string(1) for kv in table.tables(index)}


def _parse_field(f):
    name, nullable = f.string(0) or "", bool(f.scalar(1, "B"))
    children = [_parse_field(c) for c in f.tables(5)]
    dtype = _parse_type(f.scalar(2, "B"), f.table(3), children)
    encoding = f.table(4)
    if encoding is not None:
        index = encoding.table(1)
        index_type = t.DataType("int", index.scalar(0, "i"), bool(index.scalar(1, "B"))) if index else t.int32()
        dtype = t.dictionary(index_type, dtype, bool(encoding.scalar(2, "B")))
    return t.Field(name, dtype, nullable, _key_values(f, 6))


def _parse_type(type_id, table, children):
    kind = _TYPE_NAMES.get(type_id)
    if kind is None:
        what = _UNSUPPORTED.get(type_id, f"type {type_id}")
        raise IpcError(f"weir's Python SDK cannot read {what} columns")
    if kind == "int":
        return t.DataType("int", table.scalar(0, "i"), bool(table.scalar(1, "B")))
    if kind == "float":
        return t.DataType("float", (16, 32, 64)[table.scalar(0, "h")])
    if kind == "decimal":
        return t.DataType("decimal", table.scalar(2, "i", 128), precision=table.scalar(0, "i"), scale=table.scalar(1, "i"))
    if kind == "date":
        return t.date32() if table.scalar(0, "h", 1) == 0 else t.date64()
    if kind == "time":
        return t.DataType("time", table.scalar(1, "i", 32), unit=_UNITS[table.scalar(0, "h", 1)])
    if kind == "timestamp":
        return t.timestamp(_UNITS[table.scalar(0, "h")], table.string(1))
    if kind == "duration":
        return t.duration(_UNITS[table.scalar(0, "h", 1)])
    if kind == "interval":
        unit = _INTERVALS[table.scalar(0, "h")]
        return t.DataType("interval", {"year_month": 32, "day_time": 64, "month_day_nano": 128}[unit], unit=unit)
    if kind == "fixed_size_binary":
        return t.fixed_size_binary(table.scalar(0, "i"))
    if kind == "fixed_size_list":
        return t.DataType("fixed_size_list", table.scalar(0, "i"), fields=children)
    if kind == "map":
        return t.DataType("map", fields=children, flag=bool(table.scalar(0, "B")))
    if kind == "union":
        mode = "dense" if table.scalar(0, "h") == 1 else "sparse"
        ids = [i for (i,) in table.structs(1, "i")] or list(range(len(children)))
        return t.DataType("union", fields=children, mode=mode, type_ids=ids)
    if kind in ("list", "large_list", "struct"):
        return t.DataType(kind, fields=children)
    return t.DataType(kind)


def parse_schema(message):
    header = message.table(2)
    return t.Schema([_parse_field(f) for f in header.tables(1)], _key_values(header, 2))


def _dictionary_fields(fields):
    """The dictionary-encoded fields, depth first: the order their ids are given in."""
    for f in fields:
        if f.type.kind == "dictionary":
            yield f
            yield from _dictionary_fields(f.type.value.fields)
        else:
            yield from _dictionary_fields(f.type.fields)


def _schema_dictionary_ids(message):
    """The dictionary id of each dictionary-encoded field, in the same depth-first order."""
    def walk(fields):
        for f in fields:
            encoding = f.table(4)
            if encoding is not None:
                yield encoding.scalar(0, "q")
            yield from walk(f.tables(5))
    return list(walk(message.table(2).tables(1)))


class _Body:
    def __init__(self, batch, body):
        if batch.table(3) is not None:
            raise IpcError("the Arrow IPC stream is compressed, which weir's Python SDK does not read")
        self.nodes = iter(batch.structs(1, "qq"))
        self.buffers = iter(batch.structs(2, "qq"))
        self.body = body

    def buffer(self):
        offset, length = next(self.buffers)
        return self.body[offset : offset + length]

    def array(self, dtype, dictionaries):
        length, nulls = next(self.nodes)
        kind = dtype.kind
        if kind == "null":
            return Array(dtype, length, length)
        if kind == "union":
            buffers = [self.buffer()] + ([self.buffer()] if dtype.mode == "dense" else [])
            children = [self.array(f.type, dictionaries) for f in dtype.fields]
            return Array(dtype, length, 0, None, buffers, children)
        validity = self.buffer()
        validity = validity if nulls and len(validity) else None
        if kind in ("string", "large_string", "binary", "large_binary"):
            buffers, children = [self.buffer(), self.buffer()], []
        elif kind in ("list", "large_list", "map"):
            buffers, children = [self.buffer()], [self.array(dtype.fields[0].type, dictionaries)]
        elif kind in ("fixed_size_list", "struct"):
            buffers, children = [], [self.array(f.type, dictionaries) for f in dtype.fields]
        else:
            buffers, children = [self.buffer()], []
        dictionary = None
        if kind == "dictionary":
            dictionary = dictionaries.get(id(dtype))
            if dictionary is None:
                raise IpcError("a dictionary-encoded column comes before its dictionary in the Arrow IPC stream")
        return Array(dtype, length, nulls, validity, buffers, children, dictionary)


def read_stream(data):
    """The schema and record batches of one IPC stream. The arrays point into `data`."""
    from .batch import RecordBatch

    schema, batches, dictionaries, by_id, raw_dictionaries = None, [], {}, {}, []
    raw_schema = None
    for message, body, raw in _messages(data):
        kind = message.scalar(1, "B")
        if kind == _SCHEMA:
            schema, raw_schema = parse_schema(message), raw
            fields = list(_dictionary_fields(schema.fields))
            by_id = dict(zip(_schema_dictionary_ids(message), fields))
            continue
        if schema is None:
            raise IpcError("the Arrow IPC stream does not start with a schema")
        header = message.table(2)
        if kind == _DICTIONARY:
            field = by_id.get(header.scalar(0, "q"))
            if field is None:
                raise IpcError(f"the Arrow IPC stream has a dictionary for id {header.scalar(0, 'q')}, which no column uses")
            if header.scalar(2, "B"):
                raise IpcError("the Arrow IPC stream has a delta dictionary, which weir's Python SDK does not read")
            # Keyed by the column's type object, which is its own even where two columns' types are equal.
            dictionaries[id(field.type)] = _Body(header.table(1), body).array(field.type.value, dictionaries)
            raw_dictionaries.append(raw)
        elif kind == _RECORD_BATCH:
            reader = _Body(header, body)
            columns = [reader.array(f.type, dictionaries) for f in schema.fields]
            batch = RecordBatch(schema, columns, header.scalar(0, "q"))
            batch._raw = [raw_schema, *raw_dictionaries, raw]
            batches.append(batch)
        else:
            raise IpcError(f"the Arrow IPC stream holds a message of kind {kind}, not a table")
    if schema is None:
        raise IpcError("the bytes are not an Arrow IPC stream: they hold no schema")
    if len(batches) == 1 and not raw_dictionaries:
        batches[0]._whole = data
    return schema, batches


# Writing ---------------------------------------------------------------


def _type_table(dtype):
    k = dtype.kind
    unit = _UNITS.index(dtype.unit) if dtype.unit in _UNITS else 0
    if k == "int":
        return fb.table([("i", dtype.bit_width), ("?", dtype.signed)])
    if k == "float":
        return fb.table([("h", {16: 0, 32: 1, 64: 2}[dtype.bit_width])])
    if k == "decimal":
        return fb.table([("i", dtype.precision), ("i", dtype.scale), ("i", dtype.bit_width)])
    if k == "date":
        return fb.table([("h", 0 if dtype.bit_width == 32 else 1)])
    if k == "time":
        return fb.table([("h", unit), ("i", dtype.bit_width)])
    if k == "timestamp":
        return fb.table([("h", unit), fb.string(dtype.tz) if dtype.tz is not None else None])
    if k == "duration":
        return fb.table([("h", unit)])
    if k == "interval":
        return fb.table([("h", _INTERVALS.index(dtype.unit))])
    if k == "fixed_size_binary":
        return fb.table([("i", dtype.byte_width)])
    if k == "fixed_size_list":
        return fb.table([("i", dtype.list_size)])
    if k == "map":
        return fb.table([("?", dtype.flag)])
    if k == "union":
        return fb.table([("h", 1 if dtype.mode == "dense" else 0), fb.structs("i", [(i,) for i in dtype.type_ids])])
    return fb.table([])


def _key_values_ref(metadata):
    if not metadata:
        return None
    return fb.tables([fb.table([fb.string(k), fb.string(v)]) for k, v in metadata.items()])


def _field_ref(field, ids):
    dtype, encoding = field.type, None
    if dtype.kind == "dictionary":
        index = fb.table([("i", dtype.index.bit_width), ("?", dtype.index.signed)])
        encoding = fb.table([("q", ids[id(dtype)]), index, ("?", dtype.flag)])
        dtype = dtype.value
    children = fb.tables([_field_ref(c, ids) for c in dtype.fields])
    return fb.table([fb.string(field.name), ("?", field.nullable), ("B", _TYPE_IDS[dtype.kind]),
                     _type_table(dtype), encoding, children, _key_values_ref(field.metadata)])


def _message(header_type, header, body_len):
    metadata = fb.Builder().finish(fb.table([("h", _V5), ("B", header_type), header, ("q", body_len)]))
    padded = metadata + b"\0" * (-(len(metadata) + 8) % 8)
    return _CONTINUATION + struct.pack("<i", len(padded)) + padded


def _pad8(n):
    return -n % 8


def _record_batch(length, arrays):
    """A record batch message and its body for `arrays` (depth first)."""
    nodes, buffers, body = [], [], []
    at = 0

    def add(buf):
        nonlocal at
        buf = bytes(buf) if buf is not None else b""
        buffers.append((at, len(buf)))
        body.append(buf + b"\0" * _pad8(len(buf)))
        at += len(buf) + _pad8(len(buf))

    def walk(array):
        nodes.append((array.length, array.null_count))
        kind = array.type.kind
        if kind == "null":
            return
        if kind != "union":
            add(array.validity)
        for buf in array.buffers:
            add(buf)
        for child in array.children:
            walk(child)

    for array in arrays:
        walk(array)
    header = fb.table([("q", length), fb.structs("qq", nodes), fb.structs("qq", buffers)])
    return header, b"".join(body), at


def _dictionary_arrays(fields, columns):
    """(column type, dictionary) of every dictionary-encoded column, depth first."""
    for field, array in zip(fields, columns):
        if field.type.kind == "dictionary":
            yield field.type, array.dictionary
            yield from _dictionary_arrays(field.type.value.fields, array.dictionary.children)
        else:
            yield from _dictionary_arrays(field.type.fields, array.children)


def write_stream(schema, batches):
    """One IPC stream of `schema` and `batches` (RecordBatch objects of that schema)."""
    batches = list(batches)
    # Rows read from one frame and not changed since are written as they came.
    if batches and all(b._raw is not None and b.schema is batches[0].schema for b in batches):
        if len(batches) == 1 and batches[0]._whole is not None:
            return batches[0]._whole
        first = batches[0]._raw
        out = [first[0]]
        for b in batches:
            out.extend(b._raw[1:])
        return b"".join(out) + _END
    ids = {id(f.type): i for i, f in enumerate(_dictionary_fields(schema.fields))}
    out = [_message(_SCHEMA, fb.table([("h", 0), fb.tables([_field_ref(f, ids) for f in schema.fields]),
                                        _key_values_ref(schema.metadata)]), 0)]
    sent = {}
    for batch in batches:
        for dtype, dictionary in _dictionary_arrays(schema.fields, batch.columns):
            if sent.get(id(dtype)) is not dictionary:
                header, body, size = _record_batch(dictionary.length, [dictionary])
                out += [_message(_DICTIONARY, fb.table([("q", ids[id(dtype)]), header, ("?", False)]), size), body]
                sent[id(dtype)] = dictionary
        header, body, size = _record_batch(batch.num_rows, batch.columns)
        out += [_message(_RECORD_BATCH, header, size), body]
    return b"".join(out) + _END
