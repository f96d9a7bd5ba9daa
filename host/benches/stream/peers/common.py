"""What every peer of the benchmark shares: its arguments, its clock, its answer.

PEER.py BOOTSTRAP TOPIC GROUP MESSAGES BATCH_MESSAGES BATCH_MB OUT_DIR [KEY=VALUE...]
(the same as python_path.py's). Each peer reads the topic from the beginning in a
fresh group, writes parquet (zstd) batches of BATCH_MESSAGES messages into OUT_DIR
and stops once MESSAGES are written, then prints one JSON line:
{"messages", "seconds": first message to last file, "cpu_seconds": this process's CPU
from the start of the stream (before the group is joined: CPU only, the join idles),
"peak_rss_mb": the process's peak resident memory}. The clock starts at the first
message the peer's own code sees; pathway decodes a minibatch (at most 100 ms of
reading here) before that.
"""
import json
import resource
import sys
import time


class Run:
    def __init__(self):
        bootstrap, topic, group, total, batch, batch_mb, out_dir = sys.argv[1:8]
        self.bootstrap, self.topic, self.group, self.out_dir = bootstrap, topic, group, out_dir
        self.total, self.batch, self.batch_bytes = int(total), int(batch), float(batch_mb) * 1024 * 1024
        self.settings = dict(kv.split("=", 1) for kv in sys.argv[8:])
        self.started = None
        self.done = 0
        self.started_cpu = time.process_time()

    def stream_starts(self):
        """Call just before the peer starts consuming: its CPU counts from here."""
        self.started_cpu = time.process_time()

    def first_message(self):
        if self.started is None:
            self.started = time.monotonic()

    def answer(self):
        seconds, cpu = time.monotonic() - self.started, time.process_time() - self.started_cpu
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        answer = {"messages": self.done, "seconds": seconds, "cpu_seconds": cpu, "peak_rss_mb": peak_kib / 1024}
        print(json.dumps(answer), flush=True)
