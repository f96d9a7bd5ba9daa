// A passthrough publisher in JavaScript: every record batch of the input goes
// out unchanged as the table `clicks` (as the bytes it came in).
import { publisher, write } from 'weir';

export const publish = publisher((slots) => {
  let rows = 0;
  for (const batch of slots[0]) {
    write('clicks', batch);
    rows += batch.numRows;
  }
  console.log(`passed ${rows} rows through`);
});
