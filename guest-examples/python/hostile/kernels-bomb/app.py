"""Hostile fixture: doubles every URL's length in weir's kernels, over and
over, until something stops it (the memory cap, which covers the kernels'
memory as it covers the interpreter's)."""
import weir
from weir.frame import col, frames

DOUBLED = col("url").str.replace_all(".", "$0$0")


@weir.publisher
def publish(slots):
    for frame in frames(slots[0]):
        while True:
            frame = frame.with_columns(DOUBLED)
