"""An independent producer of registry-framed Avro values, for the Kafka
source's subject-strategy and schema-reference tests: Confluent's own
AvroSerializer and SchemaRegistryClient.

    subjects.py records --bootstrap B --topic T --registry URL --strategy record|topic_record --count N

writes N values alternating two record types, weir.test.Click (even i) and
weir.test.View (odd i), each registered under the subject the strategy names.

    subjects.py references --bootstrap B --topic T --registry URL --count N

registers weir.test.Geo under subject `geo`, then writes N weir.test.Place
values whose schema uses Geo by reference (registered under `<topic>-value`
with that reference).
"""

import argparse
import json
import sys

CLICK = {
    "type": "record",
    "name": "Click",
    "namespace": "weir.test",
    "fields": [{"name": "id", "type": "long"}, {"name": "url", "type": "string"}],
}
VIEW = {
    "type": "record",
    "name": "View",
    "namespace": "weir.test",
    "fields": [{"name": "id", "type": "long"}, {"name": "page", "type": "string"}],
}
GEO = {
    "type": "record",
    "name": "Geo",
    "namespace": "weir.test",
    "fields": [{"name": "lat", "type": "double"}, {"name": "lon", "type": "double"}],
}
PLACE = {
    "type": "record",
    "name": "Place",
    "namespace": "weir.test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "at", "type": "Geo"},
        {"name": "was", "type": ["null", "Geo"], "default": None},
    ],
}


def main():
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import (
        Schema,
        SchemaReference,
        SchemaRegistryClient,
        record_subject_name_strategy,
        topic_record_subject_name_strategy,
    )
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["records", "references"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--registry", required=True)
    parser.add_argument("--strategy", choices=["record", "topic_record"])
    parser.add_argument("--count", type=int, default=20)
    args = parser.parse_args()

    registry = SchemaRegistryClient({"url": args.registry})
    ctx = SerializationContext(args.topic, MessageField.VALUE)
    p = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5})
    if args.command == "records":
        strategy = {"record": record_subject_name_strategy, "topic_record": topic_record_subject_name_strategy}[
            args.strategy
        ]
        conf = {"subject.name.strategy": strategy}
        click = AvroSerializer(registry, json.dumps(CLICK), conf=conf)
        view = AvroSerializer(registry, json.dumps(VIEW), conf=conf)
        for i in range(args.count):
            if i % 2 == 0:
                value = click({"id": i, "url": f"/c/{i}"}, ctx)
            else:
                value = view({"id": i, "page": f"/v/{i}"}, ctx)
            p.produce(args.topic, key=str(i).encode(), value=value, partition=0)
            p.poll(0)
    else:
        registry.register_schema("geo", Schema(json.dumps(GEO), "AVRO"))
        version = registry.get_latest_version("geo").version
        place = Schema(json.dumps(PLACE), "AVRO", [SchemaReference("weir.test.Geo", "geo", version)])
        ser = AvroSerializer(registry, place)
        for i in range(args.count):
            value = ser({"id": i, "at": {"lat": i / 10, "lon": -i / 10}, "was": None if i % 2 else {"lat": 1.0, "lon": 2.0}}, ctx)
            p.produce(args.topic, key=str(i).encode(), value=value, partition=0)
            p.poll(0)
    if p.flush(30):
        sys.exit("messages were not acknowledged")


if __name__ == "__main__":
    main()
