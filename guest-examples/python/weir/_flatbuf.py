"""Just enough FlatBuffers to read and write Arrow's IPC messages.

Reading follows the format: a table starts with a signed offset back to its
vtable, and the vtable gives each field's place in the table (0: absent).

Writing lays a buffer out front to back, which FlatBuffers allows: every
table is preceded by its vtable and followed by what it points to (strings,
vectors, subtables), and each forward offset is patched in once its target
is written.
"""
import struct

_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_REFERENCES = ("table", "string", "tables", "structs")


class Table:
    """One table of a buffer, read in place."""

    __slots__ = ("buf", "pos", "vtable", "vtable_len")

    def __init__(self, buf, pos):
        self.buf, self.pos = buf, pos
        self.vtable = pos - _I32.unpack_from(buf, pos)[0]
        self.vtable_len = _U16.unpack_from(buf, self.vtable)[0]

    @classmethod
    def root(cls, buf):
        return cls(buf, _U32.unpack_from(buf, 0)[0])

    def _field(self, index):
        at = 4 + 2 * index
        if at >= self.vtable_len:
            return 0
        return _U16.unpack_from(self.buf, self.vtable + at)[0]

    def scalar(self, index, fmt, default=0):
        at = self._field(index)
        return struct.unpack_from("<" + fmt, self.buf, self.pos + at)[0] if at else default

    def _target(self, index):
        at = self._field(index)
        if not at:
            return None
        at += self.pos
        return at + _U32.unpack_from(self.buf, at)[0]

    def table(self, index):
        at = self._target(index)
        return None if at is None else Table(self.buf, at)

    def string(self, index):
        at = self._target(index)
        if at is None:
            return None
        n = _U32.unpack_from(self.buf, at)[0]
        return bytes(self.buf[at + 4 : at + 4 + n]).decode()

    def _vector(self, index):
        at = self._target(index)
        return (0, 0) if at is None else (at + 4, _U32.unpack_from(self.buf, at)[0])

    def tables(self, index):
        start, n = self._vector(index)
        return [Table(self.buf, p + _U32.unpack_from(self.buf, p)[0]) for p in range(start, start + 4 * n, 4)]

    def structs(self, index, fmt):
        """A vector of structs (or scalars) of the given struct format, as tuples."""
        start, n = self._vector(index)
        layout = struct.Struct("<" + fmt)
        return list(layout.iter_unpack(self.buf[start : start + n * layout.size]))


class Builder:
    """Writes one buffer, front to back. A value to write is described as:

    * ``table([...])``: a list indexed by field id, each ``None`` (absent),
      ``(fmt, value)`` for a scalar, or a reference (the other kinds);
    * ``string(text)``, ``tables([...])``, ``structs(fmt, [tuple, ...])``.
    """

    def __init__(self):
        self.buf = bytearray()

    def _align(self, n, extra=0):
        self.buf.extend(b"\0" * (-(len(self.buf) + extra) % n))

    def finish(self, root):
        self.buf.extend(b"\0" * 4)
        self._patch(0, root)
        return bytes(self.buf)

    def _patch(self, slot, ref):
        """Writes `ref` after everything so far, and points the offset at `slot` to it."""
        at = self._write(ref)
        _U32.pack_into(self.buf, slot, at - slot)

    def _write(self, ref):
        kind, value = ref
        if kind == "table":
            return self._table(value)
        if kind == "string":
            data = value.encode()
            self._align(4)
            at = len(self.buf)
            self.buf.extend(_U32.pack(len(data)) + data + b"\0")
            return at
        if kind == "tables":
            self._align(4)
            at = len(self.buf)
            self.buf.extend(_U32.pack(len(value)) + b"\0" * (4 * len(value)))
            for i, table in enumerate(value):
                self._patch(at + 4 + 4 * i, table)
            return at
        if kind == "structs":
            fmt, rows = value
            layout = struct.Struct("<" + fmt)
            self._align(8, 4)
            at = len(self.buf)
            self.buf.extend(_U32.pack(len(rows)))
            for row in rows:
                self.buf.extend(layout.pack(*row))
            return at
        raise ValueError(f"not a flatbuffer value: {kind}")

    def _table(self, fields):
        # Inline layout: the vtable offset, then each field aligned to its size.
        layout, size, refs = [], 4, []
        for index, field in enumerate(fields):
            if field is None:
                continue
            fmt = "I" if field[0] in _REFERENCES else field[0]
            width = struct.calcsize(fmt)
            size += -size % width
            layout.append((index, fmt, size, field))
            size += width
        size += -size % 4
        vtable = [4 + 2 * len(fields), size] + [0] * len(fields)
        for index, _, at, _ in layout:
            vtable[2 + index] = at
        self._align(2)
        vtable_at = len(self.buf)
        self.buf.extend(struct.pack(f"<{len(vtable)}H", *vtable))
        self._align(8)
        at = len(self.buf)
        self.buf.extend(b"\0" * size)
        _I32.pack_into(self.buf, at, at - vtable_at)
        for _, fmt, offset, field in layout:
            if field[0] in _REFERENCES:
                refs.append((at + offset, field))
            else:
                struct.pack_into("<" + fmt, self.buf, at + offset, field[1])
        for slot, ref in refs:
            self._patch(slot, ref)
        return at


def table(fields):
    return ("table", fields)


def string(text):
    return ("string", text)


def tables(items):
    return ("tables", items)


def structs(fmt, rows):
    return ("structs", (fmt, rows))
