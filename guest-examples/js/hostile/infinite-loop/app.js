// Hostile fixture: never returns. The CPU deadline must stop it.
import { publisher } from 'weir';

export const publish = publisher(() => {
  let n = 0;
  for (;;) n++;
});
