// Clicks per country and site section, as guest-examples/clicks-by-section
// does in Rust, row for row:
//
// * `section` is the first path segment of `url` (`/docs/quickstart` → `docs`, `/` → `home`);
// * one row per (`country`, `section`), sorted by them (a missing country
//   first): `clicks`, `total_ms` (of the clicks with a duration) and
//   `average_ms` (null where none has one).
//
// The output is table `sections`. The group-by runs in weir's kernels
// (compiled Rust, composed into the component by `weir plugin build`).
import { publisher, write } from 'weir';
import { col, concat, frames, len, when } from 'weir/frame';

// The first path segment: after the leading slashes, up to a `/`, `?` or `#`.
const segment = col('url').str.extract('^/*([^/?#]*)', 1);
const section = when(segment.eq('')).then('home').otherwise(segment).alias('section');
const duration = col('duration_ms');

export const publish = publisher((slots) => {
  const batch = [...frames(slots[0])];
  if (batch.length === 0) return;
  const sections = concat(batch)
    .groupBy('country', section)
    .agg(len().alias('clicks'), duration.sum().alias('total_ms'), duration.mean().alias('average_ms'))
    .sort(['country', 'section']);
  write('sections', sections);
});
