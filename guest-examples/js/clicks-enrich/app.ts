// Shapes raw clicks into what analysts query, as guest-examples/clicks-enrich
// does in Rust, row for row:
//
// * drops bounces: clicks with no `duration_ms` or under 100 ms;
// * derives `section`, the first path segment of `url` (`/docs/quickstart` → `docs`, `/` → `home`);
// * renames `ts` to `clicked_at`.
//
// The output is table `clicks`, with every other column as it came in.
import { column, filter, log, publisher, rename, Type, utf8, withColumn, write } from 'weir';

const MIN_DURATION_MS = 100n;

function sectionOf(url: string): string {
  const path = url.split(/[?#]/, 1)[0];
  return path.replace(/^\/+/, '').split('/', 1)[0] || 'home';
}

export const publish = publisher((slots) => {
  let rowsIn = 0;
  let rowsOut = 0;
  for (const batch of slots[0]) {
    const duration = column(batch, 'duration_ms', Type.Int);
    let kept = filter(batch, (i) => {
      const ms = duration.get(i) as bigint | null;
      return ms !== null && ms >= MIN_DURATION_MS;
    });
    const url = column(kept, 'url', Type.Utf8);
    const sections = Array.from({ length: kept.numRows }, (_, i) => {
      const u = url.get(i) as string | null;
      return u === null ? null : sectionOf(u);
    });
    if (kept.schema.fields.some((f) => f.name === 'ts')) kept = rename(kept, { ts: 'clicked_at' });
    write('clicks', withColumn(kept, 'section', utf8(sections), { after: 'url' }));
    rowsIn += batch.numRows;
    rowsOut += kept.numRows;
  }
  log(`kept ${rowsOut} of ${rowsIn} clicks (${rowsIn - rowsOut} bounces dropped)`);
});
