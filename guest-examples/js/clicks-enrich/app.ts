// Shapes raw clicks into what analysts query, as guest-examples/clicks-enrich
// does in Rust, row for row:
//
// * drops bounces: clicks with no `duration_ms` or under 100 ms;
// * derives `section`, the first path segment of `url` (`/docs/quickstart` → `docs`, `/` → `home`);
// * renames `ts` to `clicked_at`.
//
// The output is table `clicks`, with every other column as it came in.
import { column, filter, log, numbers, publisher, rename, strings, Type, utf8, withColumn, write } from 'weir';

const MIN_DURATION_MS = 100;

function sectionOf(url: string): string {
  let end = url.length;
  for (const mark of ['?', '#']) {
    const at = url.indexOf(mark);
    if (at >= 0 && at < end) end = at;
  }
  let start = 0;
  while (start < end && url[start] === '/') start++;
  const slash = url.indexOf('/', start);
  return url.slice(start, slash >= 0 && slash < end ? slash : end) || 'home';
}

export const publish = publisher((slots) => {
  let rowsIn = 0;
  let rowsOut = 0;
  for (const batch of slots[0]) {
    // A null duration is NaN, which is never >= anything: dropped too.
    const duration = numbers(column(batch, 'duration_ms', Type.Int));
    let kept = filter(batch, (i) => duration[i] >= MIN_DURATION_MS);
    const sections = strings(column(kept, 'url', Type.Utf8)).map((u) => (u === null ? null : sectionOf(u)));
    if (kept.schema.fields.some((f) => f.name === 'ts')) kept = rename(kept, { ts: 'clicked_at' });
    write('clicks', withColumn(kept, 'section', utf8(sections), { after: 'url' }));
    rowsIn += batch.numRows;
    rowsOut += kept.numRows;
  }
  log(`kept ${rowsOut} of ${rowsIn} clicks (${rowsIn - rowsOut} bounces dropped)`);
});
