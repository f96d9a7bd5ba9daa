/**
 * Write a weir publisher as an ordinary TypeScript or JavaScript function over
 * apache-arrow record batches.
 *
 *     import { publisher, write, filter } from 'weir';
 *
 *     export const publish = publisher((slots) => {
 *       for (const batch of slots[0]) write('clicks', batch);   // one RecordBatch at a time
 *     });
 *
 * `slots` holds one `Slot` per source (a stream publisher has one); iterating
 * it reads its frames one at a time and yields their record batches. Output
 * goes out with `write(table, batches)` as it is made, or is returned as
 * `{ table: batch | batches }`. Throw `InvalidInput` for input the publisher
 * cannot handle (the batch fails the same way on every retry); anything else
 * thrown fails the batch, and weir retries it. `console.log` goes to the
 * plugin's log.
 *
 * `filter`, `take`, `rename`, `withColumn`, `numbers`, `strings` and `utf8`
 * work on the Arrow buffers directly: apache-arrow has no compute kernels of
 * its own, and its row-by-row `get` is slow.
 */
import {
  Bool,
  Data,
  DataType,
  Field,
  Float64,
  Int64,
  makeData,
  RecordBatch,
  Schema,
  Struct,
  Table,
  tableFromIPC,
  tableToIPC,
  Type,
  Utf8,
  Vector,
  makeVector,
  vectorFromArray,
} from 'apache-arrow';
import { log as hostLog, type Level } from 'weir:publisher/host@0.2.1';
import { tables as hostTables, write as hostWrite } from 'weir:publisher/output@0.2.1';
import type { Frames } from 'weir:publisher/types@0.2.1';

export { RecordBatch, Schema, Field, Table, Vector, Type };

/** Input this publisher cannot handle: the batch fails with `invalid-input`, and would on every retry. */
export class InvalidInput extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidInput';
  }
}

/** The frames one source contributed to the batch: iterate it for their record batches. */
export interface Slot extends Iterable<RecordBatch> {
  /** The source these frames came from: a Kafka source's topic ('' when the run declares none). */
  readonly source: string;
  /** How many frames the source contributed, read or not. */
  readonly frameCount: number;
  /** Each frame as a Table, read as it is reached. */
  frames(): Iterable<Table>;
  /** Each frame's Arrow IPC stream, unread. */
  bytes(): Iterable<Uint8Array>;
  /** The host's handle on the frames (which `frames` of 'weir/frame' reads straight into the kernels). */
  readonly raw: Frames;
}

/** What writes itself to a table: a frame of 'weir/frame', straight from the kernels. */
export interface Writes {
  writeTo(table: string): void;
}

export type Output = Record<string, RecordBatch | RecordBatch[] | Table | Writes>;
export type Publish = (slots: Slot[]) => Output | void;

/** The frame each record batch came in, for batches that are a frame's only one. */
const frameOf = new WeakMap<RecordBatch, Uint8Array>();

function slot(frames: Frames): Slot {
  const count = frames.count();
  function* bytes(): Generator<Uint8Array> {
    for (let bytes = frames.next(); bytes !== undefined; bytes = frames.next()) yield bytes;
  }
  function* tables(): Generator<Table> {
    for (const frame of bytes()) {
      const table = tableFromIPC(frame);
      if (table.batches.length === 1) frameOf.set(table.batches[0], frame);
      yield table;
    }
  }
  return {
    source: frames.source(),
    frameCount: count,
    frames: tables,
    bytes,
    raw: frames,
    *[Symbol.iterator]() {
      for (const table of tables()) yield* table.batches;
    },
  };
}

/** Appends `batches` (of one schema) to the output table `table`, as they are made. */
export function write(table: string, batches: RecordBatch | RecordBatch[] | Table | Writes): void {
  if ('writeTo' in batches) return batches.writeTo(table);
  const list = batches instanceof Table ? batches.batches : Array.isArray(batches) ? batches : [batches];
  if (list.length === 0) return;
  // A batch read from a frame and unchanged goes out as the bytes it came in.
  const same = list.length === 1 ? frameOf.get(list[0]) : undefined;
  hostWrite(table, same ?? tableToIPC(new Table(list), 'stream'));
}

/**
 * The output tables this run's publisher declares, in order: a stream
 * publisher's one table, named after its topic. A publisher that writes
 * `tables()[0]` serves any topic unchanged:
 *
 *     for (const batch of slots[0]) write(tables()[0], batch);
 *
 * Throws when the run declares none (a local `weir run-plugin` without `--declaration`).
 */
export function tables(): string[] {
  const declared = hostTables();
  if (declared.length === 0) throw new Error(NO_TABLES);
  return declared;
}

/** Why `tables()` throws, the same words in every SDK. */
const NO_TABLES =
  'this run declares no output tables: give `weir run-plugin` the publisher\'s declaration ' +
  '(--declaration publisher.toml), or write to a table by name';

/** One line in the plugin's log. */
export function log(message: string, level: Level = 'info'): void {
  hostLog(level, message);
}

/** Makes `fn(slots)` the component's publish function: `export const publish = publisher(fn)`. */
export function publisher(fn: Publish): (slots: Frames[]) => void {
  return (frames: Frames[]) => {
    try {
      const output = fn(frames.map(slot));
      for (const [table, batches] of Object.entries(output ?? {})) write(table, batches);
    } catch (e) {
      if (e instanceof InvalidInput) throw { tag: 'invalid-input', val: e.message };
      const error = e instanceof Error ? e : new Error(String(e));
      const stack = authorsStack(error.stack ?? '');
      if (stack) console.error(stack);
      const at = stack.match(/@([^@\s/][^@\s]*\.[jt]sx?:\d+)$/m)?.[1];
      throw { tag: 'failed', val: `${error.name}: ${error.message}${at ? ` (at ${at})` : ''}` };
    }
  };
}

/** The bundle's line map, which `weir plugin build` appends to the bundle. */
function lines(): Record<string, string> {
  return (globalThis as { __weirLines?: Record<string, string> }).__weirLines ?? {};
}

/**
 * A stack with the bundle's positions (`publish@app.js:11389:42`) put back to
 * the author's files and lines (`publish@app.ts:14`), from the line map
 * `weir plugin build` puts into the bundle; frames of the SDK, apache-arrow
 * and componentize-js, which the author did not write, are left out.
 */
function authorsStack(stack: string): string {
  const map = lines();
  if (Object.keys(map).length === 0) return stack;
  return stack
    .split('\n')
    .map((frame) => frame.replace(/app\.js:(\d+):\d+$/, (whole, line: string) => map[line] ?? whole))
    .filter((frame) => !/(app|initializer)\.js:\d+:\d+$/.test(frame))
    .join('\n');
}

/** The column `name` of `batch`, checked to be of type id `type` (`Type.Utf8`, ...) when given. */
export function column(batch: RecordBatch, name: string, type?: Type): Vector {
  const vector = batch.getChild(name);
  if (!vector) {
    const columns = batch.schema.fields.map((f) => f.name).join(', ');
    throw new InvalidInput(`the input has no column \`${name}\`: its columns are ${columns}`);
  }
  if (type !== undefined && vector.type.typeId !== type) {
    throw new InvalidInput(`the input needs a \`${name}\` column of type ${Type[type]}, not ${vector.type}`);
  }
  return vector;
}

/** The rows of `batch` where `keep` holds: one bool per row, or a function of the row's index. */
export function filter(batch: RecordBatch, keep: ArrayLike<boolean | number> | ((row: number) => boolean)): RecordBatch {
  const n = batch.numRows;
  const rows = new Int32Array(n);
  let kept = 0;
  if (typeof keep === 'function') {
    for (let i = 0; i < n; i++) if (keep(i)) rows[kept++] = i;
  } else {
    if (keep.length !== n) throw new InvalidInput(`the mask has ${keep.length} values, but the batch has ${n} rows`);
    for (let i = 0; i < n; i++) if (keep[i]) rows[kept++] = i;
  }
  return kept === n ? batch : take(batch, rows.subarray(0, kept));
}

/** The rows of `batch` at `rows`, in that order. */
export function take(batch: RecordBatch, rows: ArrayLike<number>): RecordBatch {
  const runs = runsOf(rows);
  const children = batch.schema.fields.map((_, i) => takeData(batch.data.children[i], rows, runs));
  return new RecordBatch(batch.schema, makeData({ type: new Struct(batch.schema.fields), length: rows.length, nullCount: 0, children }));
}

/** `batch` with columns renamed by `{ old: new }`; every old name must be a column. */
export function rename(batch: RecordBatch, names: Record<string, string>): RecordBatch {
  for (const old of Object.keys(names)) column(batch, old);
  const fields = batch.schema.fields.map((f) => (f.name in names ? new Field(names[f.name], f.type, f.nullable, f.metadata) : f));
  return rebuild(batch, fields, batch.data.children);
}

/**
 * `batch` with column `name` set to `values` (a Vector, or JS values of `type`,
 * inferred when not given): replaced where it is, else put after column
 * `after` (or at the end).
 */
export function withColumn(
  batch: RecordBatch,
  name: string,
  values: Vector | ArrayLike<unknown>,
  options: { after?: string; type?: DataType } = {},
): RecordBatch {
  const vector = values instanceof Vector ? values : toVector(values, options.type);
  if (vector.length !== batch.numRows) {
    throw new InvalidInput(`column \`${name}\` has ${vector.length} values, but the batch has ${batch.numRows} rows`);
  }
  // A column of a record batch is one piece: a vector of several is joined, nulls and type kept.
  const data = vector.data.length === 1 ? vector.data[0] : vectorFromArray(Array.from(vector), vector.type).data[0];
  const field = new Field(name, vector.type, vector.nullCount > 0);
  const fields = [...batch.schema.fields];
  const children = [...batch.data.children];
  const at = fields.findIndex((f) => f.name === name);
  if (at >= 0) {
    fields[at] = field;
    children[at] = data;
  } else {
    const after = options.after === undefined ? fields.length - 1 : fields.findIndex((f) => f.name === options.after);
    if (after < 0 && options.after !== undefined) column(batch, options.after);
    fields.splice(after + 1, 0, field);
    children.splice(after + 1, 0, data);
  }
  return rebuild(batch, fields, children);
}

/**
 * A numeric column's values as one Float64Array, NaN where null: read from the
 * Arrow buffers at once, much faster than `vector.get(i)` row by row. 64-bit
 * integers beyond 2^53 lose precision; read those with `get`.
 */
export function numbers(vector: Vector): Float64Array {
  const out = new Float64Array(vector.length);
  let at = 0;
  for (const data of vector.data) {
    const n = data.length;
    const values = data.values as ArrayLike<number | bigint> & { buffer: ArrayBuffer; byteOffset: number };
    if (values instanceof BigInt64Array || values instanceof BigUint64Array) {
      // Two 32-bit halves are cheaper to read than a BigInt per value.
      const words = new Int32Array(values.buffer, values.byteOffset, 2 * (data.offset + n));
      const signed = values instanceof BigInt64Array;
      for (let i = 0; i < n; i++) {
        const j = 2 * (data.offset + i);
        out[at + i] = (signed ? words[j + 1] : words[j + 1] >>> 0) * 4294967296 + (words[j] >>> 0);
      }
    } else if (data.stride === 1 && typeof values[0] !== 'bigint') {
      for (let i = 0; i < n; i++) out[at + i] = values[data.offset + i] as number;
    } else {
      throw new InvalidInput(`numbers() reads integer and floating-point columns, not ${data.type}`);
    }
    if (data.nullCount > 0 && data.nullBitmap) {
      for (let i = 0; i < n; i++) if (!isValid(data.nullBitmap, data.offset + i)) out[at + i] = NaN;
    }
    at += n;
  }
  return out;
}

/** A string column's values as JS strings, null where null: decoded from the Arrow buffers at once. */
export function strings(vector: Vector): (string | null)[] {
  const out: (string | null)[] = new Array(vector.length);
  const decoder = new TextDecoder();
  let at = 0;
  for (const data of vector.data) {
    if (data.type.typeId !== Type.Utf8) throw new InvalidInput(`strings() reads Utf8 columns, not ${data.type}`);
    const offsets = data.valueOffsets as Int32Array;
    const bytes = data.values as Uint8Array;
    const bitmap = data.nullCount > 0 ? data.nullBitmap : undefined;
    // The piece's text decoded at once. Decoding never makes more characters than
    // bytes, and as many only when each byte is one: then each value is a slice.
    const first = offsets[data.offset];
    const all = decoder.decode(bytes.subarray(first, offsets[data.offset + data.length]));
    const sliced = all.length === offsets[data.offset + data.length] - first;
    for (let i = 0; i < data.length; i++) {
      const row = data.offset + i;
      if (bitmap && !isValid(bitmap, row)) out[at + i] = null;
      else if (sliced) out[at + i] = all.slice(offsets[row] - first, offsets[row + 1] - first);
      else out[at + i] = decoder.decode(bytes.subarray(offsets[row], offsets[row + 1]));
    }
    at += data.length;
  }
  return out;
}

/** A Utf8 vector of `strings` (null or undefined for a null), built straight into Arrow buffers. */
export function utf8(strings: ArrayLike<string | null | undefined>): Vector<Utf8> {
  const n = strings.length;
  const offsets = new Int32Array(n + 1);
  const validity = new Uint8Array((n + 7) >> 3);
  const encoder = new TextEncoder();
  const parts: string[] = new Array(n);
  let length = 0;
  let nulls = 0;
  for (let i = 0; i < n; i++) {
    const s = strings[i];
    if (s === null || s === undefined) {
      nulls++;
      parts[i] = '';
    } else {
      validity[i >> 3] |= 1 << (i & 7);
      parts[i] = s;
      length += s.length;
    }
    offsets[i + 1] = length;
  }
  // Encoded at once. UTF-8 never has fewer bytes than the text has UTF-16 code
  // units, and as many only when every one is ASCII: then the offsets counted
  // in code units are the byte offsets. Otherwise each value is encoded alone.
  let bytes = encoder.encode(parts.join(''));
  if (bytes.length !== length) {
    // Three bytes a code unit at most, a lone surrogate's replacement included.
    const room = new Uint8Array(3 * length);
    let at = 0;
    for (let i = 0; i < n; i++) {
      at += encoder.encodeInto(parts[i], room.subarray(at)).written;
      offsets[i + 1] = at;
    }
    bytes = room.subarray(0, at);
  }
  const type = new Utf8();
  return makeVector(
    makeData({ type, length: n, nullCount: nulls, nullBitmap: nulls ? validity : undefined, valueOffsets: offsets, data: bytes }),
  );
}

function rebuild(batch: RecordBatch, fields: Field[], children: Data[]): RecordBatch {
  const schema = new Schema(fields, batch.schema.metadata);
  return new RecordBatch(schema, makeData({ type: new Struct(fields), length: batch.numRows, nullCount: 0, children }));
}

function toVector(values: ArrayLike<unknown>, type?: DataType): Vector {
  const sample = Array.from(values).find((v) => v !== null && v !== undefined);
  if (type instanceof Utf8 || (type === undefined && typeof sample === 'string')) {
    return utf8(values as ArrayLike<string | null>);
  }
  const inferred =
    type ?? (typeof sample === 'bigint' ? new Int64() : typeof sample === 'number' ? new Float64() : typeof sample === 'boolean' ? new Bool() : undefined);
  return inferred ? vectorFromArray(Array.from(values), inferred) : vectorFromArray(Array.from(values));
}

const isValid = (bitmap: Uint8Array, i: number) => ((bitmap[i >> 3] >> (i & 7)) & 1) === 1;

/** `rows` as runs of consecutive rows, each `[starts[j], ends[j])`, in order. */
interface Runs {
  starts: Int32Array;
  ends: Int32Array;
  count: number;
}

/**
 * The runs of `rows`. A filter's rows mostly come in runs, and buffers are
 * copied a run at a time: SpiderMonkey runs without its JIT in a component, so
 * a step per run instead of per row is most of what taking rows costs.
 */
function runsOf(rows: ArrayLike<number>): Runs {
  const n = rows.length;
  const starts = new Int32Array(n);
  const ends = new Int32Array(n);
  let count = 0;
  for (let k = 0; k < n; k++) {
    const row = rows[k];
    if (count > 0 && ends[count - 1] === row) {
      ends[count - 1] = row + 1;
    } else {
      starts[count] = row;
      ends[count] = row + 1;
      count++;
    }
  }
  return { starts, ends, count };
}

type Typed = { subarray(a: number, b: number): Typed; set(from: Typed, at: number): void; constructor: new (n: number) => Typed };

/** The values of `values` at `runs` (`stride` elements a value, from value `offset`), in a new array of its kind. */
function takeRuns(values: Typed, offset: number, stride: number, runs: Runs, n: number): Typed {
  const out = new values.constructor(n * stride);
  let at = 0;
  for (let j = 0; j < runs.count; j++) {
    const a = (offset + runs.starts[j]) * stride;
    const b = (offset + runs.ends[j]) * stride;
    out.set(values.subarray(a, b), at);
    at += b - a;
  }
  return out;
}

/** The values of `data` at `rows` (which `runs` holds as runs), as new buffers. */
function takeData(data: Data, rows: ArrayLike<number>, runs: Runs): Data {
  const n = rows.length;
  const type = data.type;
  const offset = data.offset;
  let nullCount = 0;
  let nullBitmap: Uint8Array | undefined;
  if (data.nullCount > 0 && data.nullBitmap && data.nullBitmap.length > 0) {
    nullBitmap = new Uint8Array((n + 7) >> 3);
    const bits = data.nullBitmap;
    for (let k = 0; k < n; k++) {
      if (isValid(bits, offset + rows[k])) nullBitmap[k >> 3] |= 1 << (k & 7);
      else nullCount++;
    }
  }
  const base = { type, length: n, nullCount, nullBitmap: nullCount ? nullBitmap : undefined };
  switch (type.typeId) {
    case Type.Null:
      return makeData({ type, length: n, nullCount: n } as never);
    case Type.Bool: {
      const out = new Uint8Array((n + 7) >> 3);
      for (let k = 0; k < n; k++) if (isValid(data.values as Uint8Array, offset + rows[k])) out[k >> 3] |= 1 << (k & 7);
      return makeData({ ...base, data: out } as never);
    }
    case Type.Int:
    case Type.Float:
    case Type.Date:
    case Type.Time:
    case Type.Timestamp:
    case Type.Duration:
    case Type.Interval:
    case Type.Decimal:
    case Type.FixedSizeBinary: {
      return makeData({ ...base, data: takeRuns(data.values as unknown as Typed, offset, data.stride, runs, n) } as never);
    }
    case Type.Utf8:
    case Type.Binary:
    case Type.LargeUtf8:
    case Type.LargeBinary: {
      const large = type.typeId === Type.LargeUtf8 || type.typeId === Type.LargeBinary;
      // 64-bit offsets are read as numbers: no buffer of a batch passes 2^53 bytes.
      const from = large ? Float64Array.from(data.valueOffsets as BigInt64Array, Number) : (data.valueOffsets as Int32Array);
      const bytes = data.values as Uint8Array;
      const offsets = large ? new Float64Array(n + 1) : new Int32Array(n + 1);
      let size = 0;
      for (let j = 0; j < runs.count; j++) size += from[offset + runs.ends[j]] - from[offset + runs.starts[j]];
      const out = new Uint8Array(size);
      let at = 0;
      let k = 0;
      for (let j = 0; j < runs.count; j++) {
        const a = offset + runs.starts[j];
        const b = offset + runs.ends[j];
        const shift = at - from[a];
        for (let row = a; row < b; row++) offsets[++k] = from[row + 1] + shift;
        out.set(bytes.subarray(from[a], from[b]), at);
        at += from[b] - from[a];
      }
      const valueOffsets = large ? BigInt64Array.from(offsets, BigInt) : offsets;
      return makeData({ ...base, valueOffsets, data: out } as never);
    }
    case Type.List:
    case Type.Map: {
      const from = data.valueOffsets as Int32Array;
      const offsets = new Int32Array(n + 1);
      const items: number[] = [];
      for (let k = 0; k < n; k++) {
        for (let j = from[offset + rows[k]]; j < from[offset + rows[k] + 1]; j++) items.push(j);
        offsets[k + 1] = items.length;
      }
      return makeData({ ...base, valueOffsets: offsets, child: takeData(data.children[0], items, runsOf(items)) } as never);
    }
    case Type.FixedSizeList: {
      const size = (type as unknown as { listSize: number }).listSize;
      const items: number[] = [];
      for (let k = 0; k < n; k++) for (let j = 0; j < size; j++) items.push((offset + rows[k]) * size + j);
      return makeData({ ...base, child: takeData(data.children[0], items, runsOf(items)) } as never);
    }
    case Type.Struct:
      // A struct's children carry its offset themselves.
      return makeData({ ...base, children: data.children.map((c) => takeData(c, rows, runs)) } as never);
    case Type.Dictionary: {
      const keys = takeRuns(data.values as unknown as Typed, offset, 1, runs, n);
      return makeData({ ...base, data: keys, dictionary: data.dictionary } as never);
    }
    default: {
      // Unions and views: through JS values.
      const vector = makeVector(data);
      return vectorFromArray(Array.from(rows, (r) => vector.get(r)), type).data[0];
    }
  }
}
