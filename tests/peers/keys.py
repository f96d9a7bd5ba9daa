"""An independent producer of keyed messages with headers, and a reader of
what weir committed, for the Kafka source's key and header tests.

`produce` writes `--count` messages whose values are JSON `{"id": i}` and
whose keys are in `--key-format`: encoded by the format's own libraries
(fastavro, protobuf, json) or, with `--registry`, by Confluent's serializers
for the key (subject `<topic>-key`; values then go through its JSON Schema
serializer). Every fifth message has no key; one last message (id = count)
has a key that is not one of the format's. Every message carries the headers
h=1, h=2 (a repeated key) and n (no value).
`read` prints the committed rows of the parquet files, read with pyarrow, as
JSON: bytes as `hex:…`.
"""

import argparse
import io
import json
import sys

KEY_AVRO = {
    "type": "record",
    "name": "Key",
    "namespace": "weir.test",
    "fields": [{"name": "user", "type": "string"}, {"name": "shard", "type": "long"}],
}
KEY_JSON = {
    "type": "object",
    "properties": {"user": {"type": "string"}, "shard": {"type": "integer"}},
    "required": ["user", "shard"],
}
VALUE_JSON = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
HEADERS = [("h", b"1"), ("h", b"2"), ("n", None)]


def key_record(i):
    return {"user": f"u{i}", "shard": i % 3}


def proto_class(descriptor_set, message):
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    with open(descriptor_set, "rb") as f:
        for file in descriptor_pb2.FileDescriptorSet.FromString(f.read()).file:
            pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(message))


def key_encoder(args, registry):
    from confluent_kafka.serialization import MessageField, SerializationContext

    ctx = SerializationContext(args.topic, MessageField.KEY)
    if args.key_format == "bytes":
        return lambda i: bytes([0xFF, i % 256]) + f"k{i}".encode()
    if args.key_format == "string":
        return lambda i: f"user-{i}".encode()
    if args.key_format == "json":
        if registry:
            from confluent_kafka.schema_registry.json_schema import JSONSerializer

            ser = JSONSerializer(json.dumps(KEY_JSON), registry)
            return lambda i: ser(key_record(i), ctx)
        return lambda i: json.dumps(key_record(i)).encode()
    if args.key_format == "avro":
        if registry:
            from confluent_kafka.schema_registry.avro import AvroSerializer

            ser = AvroSerializer(registry, json.dumps(KEY_AVRO))
            return lambda i: ser(key_record(i), ctx)
        import fastavro

        parsed = fastavro.parse_schema(KEY_AVRO)

        def encode(i):
            out = io.BytesIO()
            fastavro.schemaless_writer(out, parsed, key_record(i))
            return out.getvalue()

        return encode
    cls = proto_class(args.descriptor_set, args.key_message)

    def message(i):
        m = cls()
        m.user = f"u{i}"
        m.shard = i % 3
        return m

    if registry:
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

        ser = ProtobufSerializer(cls, registry, {"use.deprecated.format": False})
        return lambda i: ser(message(i), ctx)
    return lambda i: message(i).SerializeToString()


def produce(args):
    from confluent_kafka import Producer
    from confluent_kafka.serialization import MessageField, SerializationContext

    registry = None
    value = lambda i: json.dumps({"id": i}).encode()  # noqa: E731
    if args.registry:
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.json_schema import JSONSerializer

        registry = SchemaRegistryClient({"url": args.registry})
        ser = JSONSerializer(json.dumps(VALUE_JSON), registry)
        ctx = SerializationContext(args.topic, MessageField.VALUE)
        value = lambda i: ser({"id": i}, ctx)  # noqa: E731
    key = key_encoder(args, registry)
    p = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5})
    for i in range(args.count + 1):
        if i == args.count:
            k = b"\xff\xfe not a key of this format"
        elif i % 5 == 0:
            k = None
        else:
            k = key(i)
        p.produce(args.topic, key=k, value=value(i), headers=HEADERS, partition=0)
        p.poll(0)
    if p.flush(30):
        sys.exit("messages were not acknowledged")


def plain(v):
    if isinstance(v, bytes):
        return "hex:" + v.hex()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


def read(args):
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = [pq.read_table(p) for p in args.files]
    rows = pa.concat_tables(tables, promote_options="default").to_pylist() if tables else []
    rows.sort(key=lambda r: r["id"])
    keep = ["id", "_key", "_headers"]
    print(json.dumps([{k: plain(r[k]) for k in keep if k in r} for r in rows]))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--key-format", required=True, choices=["bytes", "string", "json", "avro", "protobuf"])
    p.add_argument("--count", type=int, default=20)
    p.add_argument("--registry")
    p.add_argument("--descriptor-set")
    p.add_argument("--key-message")
    r = sub.add_parser("read")
    r.add_argument("files", nargs="*")
    args = parser.parse_args()
    {"produce": produce, "read": read}[args.command](args)


if __name__ == "__main__":
    main()
