"""quixstreams 3.28 as its users write it: an Application on the topic, JSON
values, its built-in LocalFileSink with ParquetFormat (zstd), committed every
batch of messages. The sink writes before the offsets are committed: at least
once (a crash in between writes the batch again). See common.py."""
from quixstreams import Application
from quixstreams.sinks.community.file.formats import ParquetFormat
from quixstreams.sinks.community.file.local import LocalFileSink

from common import Run

run = Run()
extra = {k: v for k, v in run.settings.items()}
app = Application(
    broker_address=run.bootstrap,
    consumer_group=run.group,
    auto_offset_reset="earliest",
    consumer_extra_config=extra,
    commit_every=run.batch,
    commit_interval=60.0,
    loglevel="WARNING",
)
topic = app.topic(run.topic, value_deserializer="json")
sdf = app.dataframe(topic)


def seen(value):
    run.first_message()
    run.done += 1
    return value


sdf = sdf.update(seen)
sdf.sink(LocalFileSink(directory=run.out_dir, format=ParquetFormat(compression="zstd")))
run.stream_starts()
app.run(count=run.total, collect=False)
run.answer()
