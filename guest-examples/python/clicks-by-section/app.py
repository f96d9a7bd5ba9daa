"""Clicks per country and site section, as guest-examples/clicks-by-section
does in Rust, row for row:

* `section` is the first path segment of `url` (`/docs/quickstart` → `docs`, `/` → `home`);
* one row per (`country`, `section`), sorted by them (a missing country
  first): `clicks`, `total_ms` (of the clicks with a duration) and
  `average_ms` (null where none has one).

The output is table `sections`. The group-by runs in weir's kernels
(compiled Rust, composed into the component by `weir plugin build`).
"""
import weir
from weir.frame import col, concat, frames, len, when

# The first path segment: after the leading slashes, up to a `/`, `?` or `#`.
segment = col("url").str.extract(r"^/*([^/?#]*)", 1)
section = when(segment == "").then("home").otherwise(segment).alias("section")
duration = col("duration_ms")


@weir.publisher
def publish(slots):
    batch = list(frames(slots[0]))
    if not batch:
        return
    sections = (
        concat(batch)
        .group_by("country", section)
        .agg(len().alias("clicks"), duration.sum().alias("total_ms"), duration.mean().alias("average_ms"))
        .sort("country", "section")
    )
    weir.write("sections", sections)
