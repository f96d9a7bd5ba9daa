// Runs the SDK's buffer-level helpers natively (under Node, not in a
// component) on an Arrow IPC stream: `node select.mjs IN.arrows SPEC.json OUT_DIR`.
// SPEC names the rows to take and the mask to filter by; the results are
// written as IPC streams for test_sdk.py to hold against pyarrow's own.
import { readFileSync, writeFileSync } from 'node:fs';
import { RecordBatch, tableFromIPC, tableToIPC, Table } from 'apache-arrow';
import { filter, numbers, strings, take, utf8, withColumn } from 'weir';

const [input, specPath, out] = process.argv.slice(2);
const spec = JSON.parse(readFileSync(specPath, 'utf8')) as { rows: number[]; mask: boolean[]; numbers: string[]; strings: string[] };
const batch = tableFromIPC(readFileSync(input)).batches[0];
const save = (name: string, b: typeof batch) => writeFileSync(`${out}/${name}.arrows`, tableToIPC(new Table([b]), 'stream'));
save('take', take(batch, spec.rows));
save('filter', filter(batch, spec.mask));
const texts = strings(batch.getChild(spec.strings[0])!);
save('with', withColumn(batch, 'upper', utf8(texts.map((t) => (t === null ? null : t.toUpperCase()))), { after: spec.strings[0] }));
// A vector of two pieces, joined into the batch's one.
save('joined', withColumn(batch, 'again', utf8(texts.slice(0, 3)).concat(utf8(texts.slice(3)))));
save('surrogates', new RecordBatch({ s: utf8(['a\uD800', '\uDC00b', null, 'é']) }));
const values = {
  numbers: Object.fromEntries(spec.numbers.map((n) => [n, Array.from(numbers(batch.getChild(n)!), (v) => (Number.isNaN(v) ? null : Number.isFinite(v) ? v : String(v)))])),
  strings: Object.fromEntries(spec.strings.map((n) => [n, strings(batch.getChild(n)!)])),
};
writeFileSync(`${out}/values.json`, JSON.stringify(values));
