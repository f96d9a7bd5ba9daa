"""Independent producers and readers for weir's format tests.

`produce` writes records of every type a format has to a topic, encoded by
the format's own reference libraries: Confluent's serializers (with their own
SchemaRegistryClient) for registry-framed values, fastavro, protobuf and json
for plain ones. It writes the rows weir must make of them to `--expected`.
`verify` reads the committed parquet files with pyarrow and compares.
`client-checks` drives a registry with Confluent's client, checking the
answers the client relies on.
"""

import argparse
import base64
import datetime as dt
import decimal
import io
import json
import sys
import uuid

UTC = dt.timezone.utc
BASE_TS = dt.datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC)


def iso(t):
    return t.astimezone(UTC).isoformat()


# ---- records ---------------------------------------------------------------


def avro_record(i):
    return {
        "id": i,
        "name": f"n{i}",
        "score": i * 1.5,
        "ratio": (i % 7) / 2,
        "count": i % 1000,
        "flag": i % 2 == 0,
        "raw": bytes([i % 256, (i * 7) % 256]),
        "nickname": None if i % 3 == 0 else f"nick{i}",
        "kind": "ABC"[i % 3],
        "tags": [f"t{j}" for j in range(i % 4)],
        "attrs": {f"k{j}": j * i for j in range(i % 3)},
        "geo": {"lat": i / 10, "lon": -i / 10},
        "maybe_geo": None if i % 2 else {"lat": 1.0, "lon": 2.0},
        "day": dt.date(2026, 1, 1) + dt.timedelta(days=i % 300),
        "ts_ms": BASE_TS + dt.timedelta(milliseconds=i * 1001),
        "ts_us": BASE_TS + dt.timedelta(microseconds=i * 1000001),
        "price": decimal.Decimal(i * 123) / 100,
        "uid": uuid.UUID(int=i + 1),
        "items": [{"sku": f"s{j}", "qty": j} for j in range(i % 3)],
    }


def avro_expected(record, declared):
    """The row weir must make: the declared fields, defaults where the writer had none."""
    row = {}
    for field in declared["fields"]:
        name = field["name"]
        value = record.get(name, field.get("default"))
        row[name] = norm(value)
    return row


def json_record(i):
    return {
        "id": i,
        "name": f"n{i}",
        "score": i * 1.5,
        "flag": i % 2 == 0,
        "nickname": None if i % 3 == 0 else f"nick{i}",
        "tags": [f"t{j}" for j in range(i % 4)],
        "geo": {"lat": i / 10, "lon": -i / 10},
        "ts": (BASE_TS + dt.timedelta(microseconds=i * 1000001)).isoformat().replace("+00:00", "Z"),
        "day": (dt.date(2026, 1, 1) + dt.timedelta(days=i % 300)).isoformat(),
        "items": [{"sku": f"s{j}", "qty": j} for j in range(i % 3)],
    }


def json_expected(record):
    row = dict(record)
    row["ts"] = iso(dt.datetime.fromisoformat(record["ts"].replace("Z", "+00:00")))
    return {k: norm(v) for k, v in row.items()}


def proto_classes(descriptor_set, message):
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from google.protobuf import duration_pb2, struct_pb2, timestamp_pb2, wrappers_pb2  # noqa: F401 (load the well-known types)

    pool = descriptor_pool.Default()
    with open(descriptor_set, "rb") as f:
        files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    for file in files.file:
        if not file.name.startswith("google/protobuf/"):
            try:
                pool.Add(file)
            except TypeError:
                pass  # already added by an earlier call
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(message))


def proto_record(cls, i):
    m = cls()
    m.id = i
    m.name = f"n{i}"
    m.score = i * 1.5
    m.ratio = (i % 7) / 2
    m.count = i % 1000
    m.flag = i % 2 == 0
    m.raw = bytes([i % 256, (i * 7) % 256])
    if i % 3:
        m.nickname = f"nick{i}"
    m.kind = i % 3
    m.tags.extend(f"t{j}" for j in range(i % 4))
    for j in range(i % 3):
        m.attrs[f"k{j}"] = j * i
    m.geo.lat = i / 10
    m.geo.lon = -i / 10
    for j in range(i % 3):
        item = m.items.add()
        item.sku = f"s{j}"
        item.qty = j
    m.ts.FromDatetime(BASE_TS + dt.timedelta(microseconds=i * 1000001))
    m.took.FromMicroseconds(i * 1500)
    if i % 2:
        m.maybe_count.value = i
    if i % 4 == 1:
        m.maybe_name.value = f"w{i}"
    if i % 2:
        m.url = f"/page/{i}"
    else:
        m.button = i
    m.small = i
    m.big = 2**40 + i
    m.delta = -i
    m.extra.update({"a": i, "b": [1, "x"]})
    m.scores.extend(j - i for j in range(i % 5))  # packed on the wire
    return m


def proto_expected(m, i):
    kinds = ["KIND_UNKNOWN", "A", "B"]
    return {
        "id": i,
        "name": m.name,
        "score": norm(m.score),
        "ratio": norm(m.ratio),
        "count": m.count,
        "flag": m.flag,
        "raw": norm(m.raw),
        "nickname": m.nickname if m.HasField("nickname") else None,
        "kind": kinds[m.kind],
        "tags": list(m.tags),
        "attrs": dict(sorted(m.attrs.items())),
        "geo": {"lat": norm(m.geo.lat), "lon": norm(m.geo.lon)},
        "items": [{"sku": it.sku, "qty": it.qty} for it in m.items],
        "ts": iso(BASE_TS + dt.timedelta(microseconds=i * 1000001)),
        "took": i * 1500,
        "maybe_count": i if i % 2 else None,
        "maybe_name": f"w{i}" if i % 4 == 1 else None,
        "url": f"/page/{i}" if i % 2 else None,
        "button": None if i % 2 else i,
        "small": i,
        "big": 2**40 + i,
        "delta": -i,
        "extra": {"a": i, "b": [1, "x"]},
        "scores": [j - i for j in range(i % 5)],
    }


# ---- normal form shared by expected and committed rows -----------------------


def norm(v):
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        return round(v, 4)
    if isinstance(v, dt.datetime):
        return iso(v)
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return (v.days * 86400 + v.seconds) * 1_000_000 + v.microseconds
    if isinstance(v, decimal.Decimal):
        # whole numbers as integers: decimal(20,0) is how a Delta table holds an
        # unsigned 64-bit integer
        if v == v.to_integral_value():
            return int(v)
        return str(v.quantize(decimal.Decimal("0.01")))
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if isinstance(v, dict):
        return {k: norm(x) for k, x in sorted(v.items())}
    if isinstance(v, (list, tuple)):
        # pyarrow reads a map as a list of (key, value) tuples
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
            return {k: norm(x) for k, x in sorted(v)}
        return [norm(x) for x in v]
    raise TypeError(f"cannot normalise {type(v)}: {v!r}")


def norm_committed(name, value, kind):
    """A committed value in normal form; `kind` names the columns weir types apart."""
    if kind.get(name) == "uuid" and value is not None:
        return str(uuid.UUID(bytes=value))
    if kind.get(name) == "json" and value is not None:
        return norm(json.loads(value))
    if name == "attrs" and value == []:
        return {}
    return norm(value)


# ---- produce ---------------------------------------------------------------


def producer(bootstrap):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})


def produce(args):
    from confluent_kafka.serialization import MessageField, SerializationContext

    registry = None
    if args.registry:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        conf = {"url": args.registry}
        if args.registry_user:
            conf["basic.auth.user.info"] = f"{args.registry_user}:{args.registry_password}"
        registry = SchemaRegistryClient(conf)
        if args.compatibility:
            registry.set_compatibility(subject_name=f"{args.topic}-value", level=args.compatibility)
    p = producer(args.bootstrap)
    ctx = SerializationContext(args.topic, MessageField.VALUE)
    expected = {}
    with open(args.schema) as f:
        writer_text = f.read()
    declared = json.loads(open(args.declared).read()) if args.declared else None

    if args.format == "avro":
        writer = json.loads(writer_text)
        if registry:
            from confluent_kafka.schema_registry.avro import AvroSerializer

            ser = AvroSerializer(registry, writer_text)
            encode = lambda r: ser(r, ctx)  # noqa: E731
        else:
            import fastavro

            parsed = fastavro.parse_schema(writer)

            def encode(r):
                out = io.BytesIO()
                fastavro.schemaless_writer(out, parsed, r)
                return out.getvalue()

        def make(i):
            r = avro_record(i)
            if args.mutate == "drop-nickname-add-extra":
                del r["nickname"]
                r["extra"] = f"x{i}"
            elif args.mutate == "name-as-long":
                r["name"] = i
            return r, avro_expected(r, declared or writer)

    elif args.format == "json":
        if registry:
            from confluent_kafka.schema_registry.json_schema import JSONSerializer

            ser = JSONSerializer(writer_text, registry)
            encode = lambda r: ser(r, ctx)  # noqa: E731
        else:
            encode = lambda r: json.dumps(r).encode()  # noqa: E731

        def make(i):
            r = json_record(i)
            return r, json_expected(r)

    else:
        cls = proto_classes(args.descriptor_set, args.message)
        if registry:
            from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

            ser = ProtobufSerializer(cls, registry, {"use.deprecated.format": False})
            encode = lambda m: ser(m, ctx)  # noqa: E731
        else:
            encode = lambda m: m.SerializeToString()  # noqa: E731

        def make(i):
            m = proto_record(cls, i)
            return m, proto_expected(m, i)

    for i in range(args.start, args.start + args.count):
        record, row = make(i)
        key = f"{args.key_prefix}{i}"
        p.produce(args.topic, key=key.encode(), value=encode(record))
        expected[key] = row
        p.poll(0)
    left = p.flush(30)
    if left:
        sys.exit(f"{left} messages were not acknowledged")
    with open(args.expected, "w") as f:
        json.dump(expected, f)


# ---- verify ----------------------------------------------------------------


def verify(args):
    import pyarrow as pa
    import pyarrow.parquet as pq

    expected = {}
    for path in args.expected:
        with open(path) as f:
            expected.update(json.load(f))
    tables = [pq.read_table(p) for p in args.files]
    table = pa.concat_tables(tables) if tables else None
    rows = table.to_pylist() if table is not None else []
    kind = json.loads(args.kinds) if args.kinds else {}
    mismatches, seen, offsets = [], set(), set()
    for row in rows:
        key = row["_key"].decode()
        if key in seen:
            mismatches.append(f"{key}: committed twice")
        seen.add(key)
        offsets.add((row["_partition"], row["_offset"]))
        if row["_timestamp"] is None:
            mismatches.append(f"{key}: no _timestamp")
        if args.schema_ids and row.get("_schema_id") not in [int(i) for i in args.schema_ids.split(",")]:
            mismatches.append(f"{key}: _schema_id {row.get('_schema_id')}")
        want = expected.get(key)
        if want is None:
            mismatches.append(f"{key}: not produced")
            continue
        for name, value in want.items():
            got = norm_committed(name, row.get(name), kind)
            if got != value:
                mismatches.append(f"{key}.{name}: committed {got!r}, produced {value!r}")
    missing = sorted(set(expected) - seen)
    if len(offsets) != len(rows):
        mismatches.append("two rows share a partition and offset")
    schema = {f.name: str(f.type) for f in table.schema} if table is not None else {}
    print(json.dumps({"rows": len(rows), "missing": missing[:10], "missing_count": len(missing),
                      "mismatches": mismatches[:10], "schema": schema}))
    if mismatches or (missing and not args.allow_missing):
        sys.exit(1)


# ---- the registry, as Confluent's client sees it ----------------------------


def client_checks(args):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    c = SchemaRegistryClient({"url": args.registry})

    def fails(code, call):
        try:
            call()
        except SchemaRegistryError as e:
            assert e.error_code == code, f"error code {e.error_code}, wanted {code}: {e}"
            return
        raise AssertionError(f"expected error {code}")

    v1 = '{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}'
    v2 = '{"type":"record","name":"R","fields":[{"name":"a","type":"long"},{"name":"b","type":["null","string"],"default":null}]}'
    bad = '{"type":"record","name":"R","fields":[{"name":"a","type":"string"}]}'
    id1 = c.register_schema("checks-value", Schema(v1, "AVRO"))
    assert c.register_schema("checks-value", Schema(v1, "AVRO")) == id1, "the same schema again keeps its id"
    id2 = c.register_schema("checks-value", Schema(v2, "AVRO"))
    assert id2 != id1
    latest = c.get_latest_version("checks-value")
    assert (latest.version, latest.schema_id) == (2, id2), latest
    assert c.get_version("checks-value", 1).schema_id == id1
    assert json.loads(c.get_schema(id1).schema_str) == json.loads(v1)
    assert c.lookup_schema("checks-value", Schema(v2, "AVRO")).version == 2
    assert c.get_versions("checks-value") == [1, 2]
    assert "checks-value" in c.get_subjects()
    assert c.test_compatibility("checks-value", Schema(bad, "AVRO")) is False
    fails(409, lambda: c.register_schema("checks-value", Schema(bad, "AVRO")))
    c.set_compatibility("checks-value", "NONE")
    assert c.get_compatibility("checks-value") == "NONE"
    c.register_schema("checks-value", Schema(bad, "AVRO"))
    fails(40401, lambda: c.get_latest_version("no-such-subject"))
    fails(40403, lambda: c.get_schema(987654))
    fails(40402, lambda: c.get_version("checks-value", 99))
    fails(42201, lambda: c.register_schema("checks-value", Schema("{not avro", "AVRO")))
    # A Protobuf schema as the serializer sends it: a base64 serialized descriptor.
    from google.protobuf import descriptor_pb2

    fd = descriptor_pb2.FileDescriptorProto(name="p.proto", package="p", syntax="proto3")
    msg = fd.message_type.add(name="M")
    msg.field.add(name="x", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                  label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    encoded = base64.standard_b64encode(fd.SerializeToString()).decode()
    pid = c.register_schema("proto-value", Schema(encoded, "PROTOBUF"))
    served = c.get_schema(pid, fmt="serialized")
    assert served.schema_type == "PROTOBUF"
    assert descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(served.schema_str)).message_type[0].name == "M"
    text_id = c.register_schema("text-value", Schema('syntax = "proto3"; package t; message T { string s = 1; }', "PROTOBUF"))
    served = c.get_schema(text_id, fmt="serialized")
    assert descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(served.schema_str)).message_type[0].name == "T"
    print("ok")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--format", choices=["json", "avro", "protobuf"], required=True)
    p.add_argument("--registry")
    p.add_argument("--registry-user")
    p.add_argument("--registry-password")
    p.add_argument("--compatibility")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--schema", required=True, help="the writer's schema file (Avro, JSON Schema or .proto)")
    p.add_argument("--declared", help="Avro: the declared (reader) schema, for the expected rows")
    p.add_argument("--descriptor-set")
    p.add_argument("--message")
    p.add_argument("--mutate", choices=["drop-nickname-add-extra", "name-as-long"])
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--key-prefix", default="k")
    p.add_argument("--expected", required=True)
    v = sub.add_parser("verify")
    v.add_argument("--expected", action="append", required=True)
    v.add_argument("--kinds", help="JSON: column name to uuid|json")
    v.add_argument("--schema-ids")
    v.add_argument("--allow-missing", action="store_true")
    v.add_argument("files", nargs="*")
    c = sub.add_parser("client-checks")
    c.add_argument("--registry", required=True)
    args = ap.parse_args()
    {"produce": produce, "verify": verify, "client-checks": client_checks}[args.command](args)


if __name__ == "__main__":
    main()
