"""The path a user would otherwise write, and the reference platform's own
approach: a confluent-kafka poll loop buffering dicts, pyarrow
Table.from_pylist, a parquet write, a commit; the same rollover as weir's run.

python_path.py BOOTSTRAP TOPIC GROUP MESSAGES BATCH_MESSAGES BATCH_MB OUT_DIR [KEY=VALUE...]
Prints one JSON line: {"messages": committed, "seconds": from the first message to the last
commit, "cpu_seconds": the CPU this process used meanwhile, librdkafka's threads included}.
"""
import json
import os
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Consumer, TopicPartition

bootstrap, topic, group, total, batch_messages, batch_mb, out_dir = sys.argv[1:8]
total, batch_messages, batch_bytes = int(total), int(batch_messages), float(batch_mb) * 1024 * 1024
config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
config.update(kv.split("=", 1) for kv in sys.argv[8:])
consumer = Consumer(config)
consumer.subscribe([topic])

rows, size, done, batches, started, started_cpu, offsets = [], 0, 0, 0, None, None, {}
while done < total:
    for message in consumer.consume(num_messages=10000, timeout=0.5):
        if message.error():
            continue
        if started is None:
            started, started_cpu = time.monotonic(), time.process_time()
        value = message.value()
        rows.append(json.loads(value))
        offsets[message.partition()] = message.offset() + 1
        size += len(value)
        if len(rows) >= batch_messages or size >= batch_bytes or done + len(rows) >= total:
            table = pa.Table.from_pylist(rows)
            pq.write_table(table, os.path.join(out_dir, f"batch-{batches}.parquet"), compression="zstd")
            consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
            done += len(rows)
            batches += 1
            rows, size = [], 0
            if done >= total:
                break
consumer.close()
seconds, cpu = time.monotonic() - started, time.process_time() - started_cpu
print(json.dumps({"messages": done, "seconds": seconds, "cpu_seconds": cpu}))
