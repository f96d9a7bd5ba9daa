// A publisher over weir's columnar kernels, composed into the component by
// `weir plugin build`: keeps the clicks of 100 ms or more, adds `duration_s`,
// and writes the columns it names. Its rows never become JavaScript values:
// each expression is evaluated by the kernels (compiled Rust) in one call.
import { log, publisher, tables, write } from 'weir';
import { col, frames } from 'weir/frame';

export const publish = publisher((slots) => {
  let rows = 0;
  for (const frame of frames(slots[0])) {
    const kept = frame
      .filter(col('duration_ms').gtEq(100))
      .withColumns(col('duration_ms').divideBy(1000).alias('duration_s'))
      .select('event_id', 'url', 'duration_ms', 'duration_s');
    rows += kept.height;
    write(tables()[0], kept);
  }
  log(`kept ${rows} clicks`);
});
