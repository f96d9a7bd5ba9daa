// Hostile fixture: holds ever more memory, touched, until something stops it.
import { publisher } from 'weir';

export const publish = publisher(() => {
  const hoard = [];
  for (;;) hoard.push(new Uint8Array(16 << 20).fill(1));
});
