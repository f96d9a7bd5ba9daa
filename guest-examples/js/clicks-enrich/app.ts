// Shapes raw clicks into what analysts query, as guest-examples/clicks-enrich
// does in Rust, row for row:
//
// * drops bounces: clicks with no `duration_ms` or under 100 ms;
// * derives `section`, the first path segment of `url` (`/docs/quickstart` → `docs`, `/` → `home`);
// * renames `ts` to `clicked_at`.
//
// The output is table `clicks`, with every other column as it came in. No row
// becomes a JavaScript value: each expression is evaluated by weir's kernels
// (compiled Rust, composed into the component by `weir plugin build`).
import { log, publisher, write } from 'weir';
import { col, frames, when } from 'weir/frame';

const MIN_DURATION_MS = 100;

// The first path segment: after the leading slashes, up to a `/`, `?` or `#`.
const segment = col('url').str.extract('^/*([^/?#]*)', 1);
const section = when(segment.eq('')).then('home').otherwise(segment).alias('section');

export const publish = publisher((slots) => {
  let rowsIn = 0;
  let rowsOut = 0;
  for (const frame of frames(slots[0])) {
    // A null duration is not >= 100: dropped too.
    let kept = frame.filter(col('duration_ms').gtEq(MIN_DURATION_MS)).withColumns(section);
    // `section` right after `url`, where the Rust example puts it.
    const columns = kept.columns.filter((c) => c !== 'section');
    const at = columns.indexOf('url') + 1;
    kept = kept.select(...columns.slice(0, at), 'section', ...columns.slice(at));
    if (kept.columns.includes('ts')) kept = kept.rename({ ts: 'clicked_at' });
    write('clicks', kept);
    rowsIn += frame.height;
    rowsOut += kept.height;
  }
  log(`kept ${rowsOut} of ${rowsIn} clicks (${rowsIn - rowsOut} bounces dropped)`);
});
