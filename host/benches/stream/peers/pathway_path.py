"""pathway 0.33 as its users write it: `pw.io.kafka.read` with the events' schema
(JSON decoded in pathway's Rust engine), rows handed to `pw.io.subscribe`, each
batch written as parquet with pyarrow (pathway's own Delta writer and its
persistence need a license key). Without persistence a restart reads the topic
again from the reset position: at least once, at best. See common.py."""
import os

import pathway as pw
import pyarrow as pa
import pyarrow.parquet as pq

from common import Run

run = Run()


class Click(pw.Schema):
    event_id: str
    user_id: int
    url: str
    referrer: str | None
    ts: str
    duration_ms: int
    country: str
    device: str


settings = {"bootstrap.servers": run.bootstrap, "group.id": run.group, "auto.offset.reset": "earliest"}
settings.update(run.settings)
clicks = pw.io.kafka.read(settings, topic=run.topic, format="json", schema=Click, autocommit_duration_ms=100)
rows, files = [], 0


def on_change(key, row, time, is_addition):
    global rows, files
    run.first_message()
    rows.append(row)
    if len(rows) >= run.batch or run.done + len(rows) >= run.total:
        pq.write_table(pa.Table.from_pylist(rows), os.path.join(run.out_dir, f"batch-{files}.parquet"), compression="zstd")
        run.done += len(rows)
        files += 1
        rows = []
        if run.done >= run.total:
            run.answer()
            # pathway runs a stream until it is killed.
            os._exit(0)


pw.io.subscribe(clicks, on_change=on_change)
run.stream_starts()
pw.run(monitoring_level=pw.MonitoringLevel.NONE)
