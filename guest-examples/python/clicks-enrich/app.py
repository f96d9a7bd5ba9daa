"""Shapes raw clicks into what analysts query, as guest-examples/clicks-enrich
does in Rust, row for row:

* drops bounces: clicks with no `duration_ms` or under 100 ms;
* derives `section`, the first path segment of `url` (`/docs/quickstart` → `docs`, `/` → `home`);
* renames `ts` to `clicked_at`.

The output is table `clicks`, with every other column as it came in. No row
becomes a Python object: each expression is evaluated by weir's kernels
(compiled Rust, composed into the component by `weir plugin build`).
"""
import weir
from weir.frame import col, frames, when

MIN_DURATION_MS = 100

# The first path segment: after the leading slashes, up to a `/`, `?` or `#`.
segment = col("url").str.extract(r"^/*([^/?#]*)", 1)
section = when(segment == "").then("home").otherwise(segment).alias("section")


@weir.publisher
def publish(slots):
    rows_in = rows_out = 0
    for frame in frames(slots[0]):
        # A null duration is not >= 100: dropped too.
        kept = frame.filter(col("duration_ms") >= MIN_DURATION_MS).with_columns(section)
        # `section` right after `url`, where the Rust example puts it.
        columns = [c for c in kept.columns if c != "section"]
        at = columns.index("url") + 1
        kept = kept.select(columns[:at] + ["section"] + columns[at:])
        if "ts" in kept.columns:
            kept = kept.rename({"ts": "clicked_at"})
        weir.write("clicks", kept)
        rows_in, rows_out = rows_in + frame.height, rows_out + kept.height
    weir.log(f"kept {rows_out} of {rows_in} clicks ({rows_in - rows_out} bounces dropped)")
