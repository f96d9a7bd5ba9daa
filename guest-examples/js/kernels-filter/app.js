// A publisher over weir's columnar kernels (weir:frames/kernels), composed
// into the component at build time: keeps the clicks of 100 ms or more, adds
// `duration_s`, and writes the columns it names. Its frames never become
// JavaScript values: each expression is evaluated by the kernels in one call.
import { Frame } from 'weir:frames/kernels@0.1.0';
import { tables, write } from 'weir:publisher/output@0.2.1';

const col = (name) => [{ tag: 'column', val: name }];
const int = (value) => [{ tag: 'literal', val: { tag: 'int', val: BigInt(value) } }];
const float = (value) => [{ tag: 'literal', val: { tag: 'float', val: value } }];

/** `op(a, b)` as one expression's nodes: a's, b's (their indices moved past a's), then op's. */
function binary(op, a, b) {
  const shift = (node) =>
    node.tag === 'unary' ? { tag: 'unary', val: [node.val[0], node.val[1] + a.length] }
      : node.tag === 'binary' ? { tag: 'binary', val: [node.val[0], node.val[1] + a.length, node.val[2] + a.length] }
      : node;
  return [...a, ...b.map(shift), { tag: 'binary', val: [op, a.length - 1, a.length + b.length - 1] }];
}

export function publish(slots) {
  const table = tables()[0] ?? 'clicks';
  let rows = 0;
  try {
    for (let bytes = slots[0].next(); bytes !== undefined; bytes = slots[0].next()) {
      const kept = Frame.fromIpc(bytes)
        .filter({ nodes: binary('ge', col('duration_ms'), int(100)) })
        .withColumns([['duration_s', { nodes: binary('div', col('duration_ms'), float(1000)) }]])
        .select(['event_id', 'url', 'duration_ms', 'duration_s']);
      rows += Number(kept.numRows());
      write(table, kept.toIpc());
    }
  } catch (e) {
    // The kernels' errors name the expression: the input is what does not fit.
    throw { tag: 'invalid-input', val: String(e.payload ?? e.message ?? e) };
  }
  console.log(`kept ${rows} clicks`);
}
