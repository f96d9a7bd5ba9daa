"""Shapes raw clicks into what analysts query, as guest-examples/clicks-enrich
does in Rust, row for row:

* drops bounces: clicks with no `duration_ms` or under 100 ms;
* derives `section`, the first path segment of `url` (`/docs/quickstart` → `docs`, `/` → `home`);
* renames `ts` to `clicked_at`.

The output is table `clicks`, with every other column as it came in.
"""
import re

import weir
from weir import types

MIN_DURATION_MS = 100
_QUERY = re.compile(r"[?#]")


def section_of(url):
    segment = _QUERY.split(url, 1)[0].lstrip("/").split("/", 1)[0]
    return segment or "home"


def column(batch, name, dtype):
    if name not in batch.column_names or batch[name].type != dtype:
        raise ValueError(f"clicks need a `{name}` column of type {dtype}")
    return batch[name]


@weir.publisher
def publish(slots):
    rows_in = rows_out = 0
    for batch in slots[0]:
        duration = column(batch, "duration_ms", types.int64())
        kept = batch.filter([d is not None and d >= MIN_DURATION_MS for d in duration.to_pylist()])
        url = column(kept, "url", types.string())
        section = weir.Array.from_pylist([None if u is None else section_of(u) for u in url.to_pylist()], types.string())
        if "ts" in kept.column_names:
            kept = kept.rename({"ts": "clicked_at"})
        weir.write("clicks", kept.set_column("section", section, after="url"))
        rows_in, rows_out = rows_in + batch.num_rows, rows_out + kept.num_rows
    weir.log(f"kept {rows_out} of {rows_in} clicks ({rows_in - rows_out} bounces dropped)")
