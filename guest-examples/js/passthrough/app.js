// A passthrough publisher in JavaScript: every record batch of the input goes
// out unchanged (as the bytes it came in) into the table its publisher
// declares. It names no table, so one build serves any topic. With as many
// tables as input slots (a change log's, one a source table), each slot goes
// to its own table.
import { publisher, tables, write } from 'weir';

export const publish = publisher((slots) => {
  const names = tables();
  const oneEach = names.length === slots.length;
  slots.forEach((slot, i) => {
    const table = names[oneEach ? i : 0];
    let rows = 0;
    for (const batch of slot) {
      write(table, batch);
      rows += batch.numRows;
    }
    console.log(`passed ${rows} rows from ${slot.source} into ${table}`);
  });
});
