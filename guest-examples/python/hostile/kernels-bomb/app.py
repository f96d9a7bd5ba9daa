"""Hostile fixture: makes weir's kernels grow until something stops it (the
memory cap, which covers the kernels' memory as it covers the
interpreter's), in the way the declared table names:

* `urls` (or no declaration): every URL's length doubled, over and over;
* `concat`: the frame joined to itself, over and over;
* `keys`: a frame of 2^20 rows grouped by a key unique to each row, the
  groups written to the table (the cap decides whether that fits).
"""
import weir
from weir.frame import col, concat, frames, len

DOUBLED = col("url").str.replace_all(".", "$0$0")
KEYS = 1 << 20


@weir.publisher
def publish(slots):
    how = (weir.tables() or ["urls"])[0]
    for frame in frames(slots[0]):
        if how == "keys":
            small = frame.select("duration_ms")
            while small.height < KEYS:
                small = concat([small, small])
            keyed = small.head(KEYS).with_row_index("key")
            weir.log(f"grouping {keyed.height} rows by a key unique to each")
            groups = keyed.group_by("key").agg(len())
            weir.write(how, groups)
            continue
        while True:
            frame = concat([frame, frame]) if how == "concat" else frame.with_columns(DOUBLED)
