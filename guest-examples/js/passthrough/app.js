// A passthrough publisher in JavaScript: every record batch of the input goes
// out unchanged (as the bytes it came in) into the table its publisher
// declares. It names no table, so one build serves any topic.
import { publisher, tables, write } from 'weir';

export const publish = publisher((slots) => {
  const table = tables()[0];
  let rows = 0;
  for (const batch of slots[0]) {
    write(table, batch);
    rows += batch.numRows;
  }
  console.log(`passed ${rows} rows from ${slots[0].source} into ${table}`);
});
