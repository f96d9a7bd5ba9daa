"""Arrow's data types, fields and schemas, named and printed as pyarrow names them."""


class MissingColumn(KeyError, ValueError):
    """A column the publisher asked for that the input does not have: the
    plugin's invalid input (a ValueError), as in every language, and still a
    KeyError to code that looks columns up like a dict."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


class DataType:
    """One Arrow type. `kind` names it; the other attributes are its parameters."""

    __slots__ = ("kind", "bit_width", "signed", "unit", "tz", "precision", "scale", "fields", "flag", "index", "value", "mode", "type_ids")

    def __init__(self, kind, bit_width=0, signed=True, unit=None, tz=None, precision=0, scale=0,
                 fields=(), flag=False, index=None, value=None, mode=None, type_ids=()):
        self.kind, self.bit_width, self.signed, self.unit, self.tz = kind, bit_width, signed, unit, tz
        self.precision, self.scale, self.fields, self.flag = precision, scale, tuple(fields), flag
        self.index, self.value, self.mode, self.type_ids = index, value, mode, tuple(type_ids)

    def _key(self):
        return tuple(getattr(self, s) for s in self.__slots__)

    def __eq__(self, other):
        return isinstance(other, DataType) and self._key() == other._key()

    def __hash__(self):
        return hash(self.kind)

    def __repr__(self):
        return str(self)

    def __str__(self):
        k = self.kind
        if k == "int":
            return f"{'' if self.signed else 'u'}int{self.bit_width}"
        if k == "float":
            return {16: "halffloat", 32: "float", 64: "double"}[self.bit_width]
        if k == "timestamp":
            return f"timestamp[{self.unit}" + (f", tz={self.tz}]" if self.tz else "]")
        if k in ("time", "duration"):
            return f"{k}{self.bit_width if k == 'time' else ''}[{self.unit}]"
        if k == "date":
            return "date32[day]" if self.bit_width == 32 else "date64[ms]"
        if k == "decimal":
            return f"decimal{self.bit_width}({self.precision}, {self.scale})"
        if k == "fixed_size_binary":
            return f"fixed_size_binary[{self.bit_width // 8}]"
        if k == "interval":
            return {"month_day_nano": "month_day_nano_interval", "day_time": "day_time_interval", "year_month": "month_interval"}[self.unit]
        if k in ("list", "large_list"):
            return f"{k}<{self.fields[0]}>"
        if k == "fixed_size_list":
            return f"fixed_size_list<{self.fields[0]}>[{self.list_size}]"
        if k == "struct":
            return "struct<" + ", ".join(str(f) for f in self.fields) + ">"
        if k == "map":
            key, item = self.fields[0].type.fields
            return f"map<{key.type}, {item.type}{', keys_sorted' if self.flag else ''}>"
        if k == "dictionary":
            return f"dictionary<values={self.value}, indices={self.index}, ordered={int(self.flag)}>"
        if k == "union":
            return f"{self.mode}_union<" + ", ".join(f"{f}={i}" for f, i in zip(self.fields, self.type_ids)) + ">"
        return k

    @property
    def list_size(self):
        """Values per entry of a fixed-size list (kept in `bit_width`, which it has no other use for)."""
        return self.bit_width

    @property
    def byte_width(self):
        """Bytes per value of a fixed-width type (0 for bool and the nested and variable ones)."""
        if self.kind in ("int", "float", "date", "time", "timestamp", "duration", "decimal", "fixed_size_binary"):
            return self.bit_width // 8
        if self.kind == "interval":
            return {"month_day_nano": 16, "day_time": 8, "year_month": 4}[self.unit]
        return 0


class Field:
    __slots__ = ("name", "type", "nullable", "metadata")

    def __init__(self, name, type, nullable=True, metadata=None):
        self.name, self.type, self.nullable, self.metadata = name, type, nullable, dict(metadata or {})

    def __eq__(self, other):
        return isinstance(other, Field) and (self.name, self.type, self.nullable, self.metadata) == (
            other.name, other.type, other.nullable, other.metadata)

    def __repr__(self):
        return str(self)

    def __str__(self):
        return f"{self.name}: {self.type}" + ("" if self.nullable else " not null")

    def with_name(self, name):
        return Field(name, self.type, self.nullable, self.metadata)


class Schema:
    __slots__ = ("fields", "metadata")

    def __init__(self, fields, metadata=None):
        self.fields, self.metadata = list(fields), dict(metadata or {})

    def __eq__(self, other):
        return isinstance(other, Schema) and (self.fields, self.metadata) == (other.fields, other.metadata)

    def __iter__(self):
        return iter(self.fields)

    def __len__(self):
        return len(self.fields)

    def __repr__(self):
        return "\n".join(str(f) for f in self.fields)

    @property
    def names(self):
        return [f.name for f in self.fields]

    def index(self, name):
        for i, f in enumerate(self.fields):
            if f.name == name:
                return i
        raise MissingColumn(f"the input has no column `{name}`: its columns are {', '.join(self.names)}")

    def field(self, name):
        return self.fields[self.index(name)]


def _field(item, name="item"):
    return item if isinstance(item, Field) else Field(name, item)


null = lambda: DataType("null")  # noqa: E731
bool_ = lambda: DataType("bool")  # noqa: E731
int8, int16, int32, int64 = (lambda w=w: DataType("int", w) for w in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (lambda w=w: DataType("int", w, signed=False) for w in (8, 16, 32, 64))
float16, float32, float64 = (lambda w=w: DataType("float", w) for w in (16, 32, 64))
string = lambda: DataType("string")  # noqa: E731
large_string = lambda: DataType("large_string")  # noqa: E731
binary = lambda: DataType("binary")  # noqa: E731
large_binary = lambda: DataType("large_binary")  # noqa: E731
date32 = lambda: DataType("date", 32, unit="day")  # noqa: E731
date64 = lambda: DataType("date", 64, unit="ms")  # noqa: E731
month_day_nano_interval = lambda: DataType("interval", 128, unit="month_day_nano")  # noqa: E731


def fixed_size_binary(width):
    return DataType("fixed_size_binary", 8 * width)


def timestamp(unit, tz=None):
    return DataType("timestamp", 64, unit=unit, tz=tz)


def time32(unit):
    return DataType("time", 32, unit=unit)


def time64(unit):
    return DataType("time", 64, unit=unit)


def duration(unit):
    return DataType("duration", 64, unit=unit)


def decimal128(precision, scale=0):
    return DataType("decimal", 128, precision=precision, scale=scale)


def decimal256(precision, scale=0):
    return DataType("decimal", 256, precision=precision, scale=scale)


def list_(item):
    return DataType("list", fields=[_field(item)])


def large_list(item):
    return DataType("large_list", fields=[_field(item)])


def fixed_size_list(item, size):
    return DataType("fixed_size_list", size, fields=[_field(item)])


def struct(fields):
    return DataType("struct", fields=[f if isinstance(f, Field) else Field(*f) for f in fields])


def map_(key, item, keys_sorted=False):
    entries = struct([Field("key", key, False), _field(item, "value")])
    return DataType("map", fields=[Field("entries", entries, False)], flag=keys_sorted)


def dictionary(index, value, ordered=False):
    return DataType("dictionary", index=index, value=value, flag=ordered)


def field(name, type, nullable=True, metadata=None):
    return Field(name, type, nullable, metadata)


def schema(fields, metadata=None):
    return Schema([f if isinstance(f, Field) else Field(*f) for f in fields], metadata)
