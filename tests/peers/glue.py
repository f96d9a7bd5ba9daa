"""An independent producer of AWS Glue Schema Registry framed values, for the
Kafka source's Glue tests: the `aws-glue-schema-registry` package's
KafkaSerializer and codec over boto3's Glue client (pointed at moto's server),
and confluent-kafka's producer.

    glue.py produce --endpoint URL --registry NAME --bootstrap B --topic T
                    --format avro|json --schema v1|v2|other --start I --count N [--compress]

creates the registry if it has none, then writes values i = start .. start+N-1
(`id` i, `url` "/p/<i>", and under v2 `referrer` "r<i>"), registered under
the schema `<topic>-value` as the serializer's default naming strategy does.
`other` is a record whose `url` is a long, which a reader of v1 cannot read.
With --compress, the odd values are zlib-compressed by the package's codec.

    glue.py read FILE...

prints the rows of Parquet files, read with pyarrow, as one JSON list.
"""

import argparse
import json
import os
import sys

CLICK_V1 = {
    "type": "record",
    "name": "Click",
    "namespace": "weir.test",
    "fields": [{"name": "id", "type": "long"}, {"name": "url", "type": "string"}],
}
CLICK_V2 = {
    **CLICK_V1,
    "fields": CLICK_V1["fields"] + [{"name": "referrer", "type": ["null", "string"], "default": None}],
}
CLICK_OTHER = {**CLICK_V1, "fields": [{"name": "id", "type": "long"}, {"name": "url", "type": "long"}]}
CLICK_JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Click",
    "type": "object",
    "properties": {"id": {"type": "integer"}, "url": {"type": "string"}},
    "required": ["id", "url"],
}


def produce(args):
    import boto3
    from aws_schema_registry import DataAndSchema, SchemaRegistryClient, codec
    from aws_schema_registry.avro import AvroSchema
    from aws_schema_registry.jsonschema import JsonSchema
    from aws_schema_registry.serde import KafkaSerializer
    from confluent_kafka import Producer

    glue = boto3.client("glue", endpoint_url=args.endpoint, region_name=os.environ["AWS_REGION"])
    try:
        glue.create_registry(RegistryName=args.registry)
    except glue.exceptions.AlreadyExistsException:
        pass
    client = SchemaRegistryClient(glue, registry_name=args.registry, wait_interval_seconds=0.1)
    serializer = KafkaSerializer(client)
    if args.format == "json":
        schema = JsonSchema(json.dumps(CLICK_JSON))
    else:
        schema = AvroSchema(json.dumps({"v1": CLICK_V1, "v2": CLICK_V2, "other": CLICK_OTHER}[args.schema]))
    p = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5})
    for i in range(args.start, args.start + args.count):
        value = {"id": i, "url": i if args.schema == "other" else f"/p/{i}"}
        if args.schema == "v2":
            value["referrer"] = f"r{i}"
        framed = serializer.serialize(args.topic, DataAndSchema(value, schema))
        if args.compress and i % 2 == 1:
            body, version = codec.decode(framed)
            framed = codec.encode(body, version, compression=True)
        p.produce(args.topic, value=framed, key=str(i).encode())
    assert p.flush(30) == 0, "every value acknowledged"


def read(files):
    import pyarrow.parquet as pq

    rows = []
    for f in files:
        rows.extend(pq.read_table(f).to_pylist())
    print(json.dumps(rows, default=str))


def main():
    if sys.argv[1] == "read":
        return read(sys.argv[2:])
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["produce"])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--registry", required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--format", choices=["avro", "json"], required=True)
    parser.add_argument("--schema", choices=["v1", "v2", "other"], default="v1")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--compress", action="store_true")
    produce(parser.parse_args())


if __name__ == "__main__":
    main()
