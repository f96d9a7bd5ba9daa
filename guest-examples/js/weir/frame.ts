/**
 * Frames whose columns stay in weir's columnar kernels (compiled Rust on
 * arrow-rs, composed into the component by `weir plugin build`), worked on
 * with expressions shaped like Polars': each is built here and evaluated by
 * the kernels over every row in one call, so no row becomes a JavaScript value.
 *
 *     import { publisher, tables, write } from 'weir';
 *     import { col, frames } from 'weir/frame';
 *
 *     export const publish = publisher((slots) => {
 *       for (const frame of frames(slots[0])) {
 *         const long = frame.filter(col('duration_ms').gtEq(100));
 *         write(tables()[0], long.withColumns(col('duration_ms').divideBy(1000).alias('duration_s')));
 *       }
 *     });
 *
 * An expression that does not fit the frame (a column it lacks, types that
 * do not go together) throws `InvalidInput` naming the expression, so the
 * batch fails as invalid input: `` `col("url") >= 100`: cannot compare Utf8 and Int64 ``.
 */
import { Frame as Kernel, type Expr as Nodes, type Node, type Literal } from 'weir:frames/kernels@0.1.0';
import { tableFromIPC, tableFromJSON, tableToIPC, type Table } from 'apache-arrow';
import { InvalidInput, type Slot } from './index.ts';

/** A value an expression may hold: integers (number or bigint), floats, text, booleans, null. */
export type Value = number | bigint | string | boolean | null;

/** An expression over a frame's columns: `col('a').gtEq(100).and(col('b').isNotNull())`. */
export class Expr {
  /** @internal */
  constructor(
    readonly nodes: Node[],
    readonly name?: string,
  ) {}

  /** The same value, named: the column `withColumns` makes of it. */
  alias(name: string): Expr {
    return new Expr(this.nodes, name);
  }

  eq(other: Expr | Value): Expr { return this.binary('eq', other); }
  neq(other: Expr | Value): Expr { return this.binary('ne', other); }
  lt(other: Expr | Value): Expr { return this.binary('lt', other); }
  ltEq(other: Expr | Value): Expr { return this.binary('le', other); }
  gt(other: Expr | Value): Expr { return this.binary('gt', other); }
  gtEq(other: Expr | Value): Expr { return this.binary('ge', other); }
  /** Kleene logic: null and false is false, null or true is true. */
  and(other: Expr | Value): Expr { return this.binary('and', other); }
  or(other: Expr | Value): Expr { return this.binary('or', other); }
  plus(other: Expr | Value): Expr { return this.binary('add', other); }
  minus(other: Expr | Value): Expr { return this.binary('sub', other); }
  multiplyBy(other: Expr | Value): Expr { return this.binary('mul', other); }
  /** True division, as Polars': integers divide as floats. */
  divideBy(other: Expr | Value): Expr { return this.binary('div', other); }
  not(): Expr { return this.unary('not'); }
  isNull(): Expr { return this.unary('is-null'); }
  isNotNull(): Expr { return this.unary('is-not-null'); }
  neg(): Expr { return this.unary('neg'); }

  /** Where this is null, `value`'s value. */
  fillNull(value: Expr | Value): Expr { return call('fill_null', this, value); }
  /** As another type: Polars' names (`'Int64'`, `'Float64'`, `'String'`, `'Boolean'`, `'Date'`, `'Datetime'`) or arrow's. */
  cast(type: string): Expr { return call('cast', this, type); }
  /** Aggregations, for `groupBy(…).agg(…)`: the sum of a group's values (0 for none; integers as int64). */
  sum(): Expr { return call('sum', this); }
  mean(): Expr { return call('mean', this); }
  min(): Expr { return call('min', this); }
  max(): Expr { return call('max', this); }
  /** How many of a group's values are not null. */
  count(): Expr { return call('count', this); }
  first(): Expr { return call('first', this); }
  last(): Expr { return call('last', this); }
  /** Text functions: `col('url').str.extract('^/*([^/?#]*)', 1)`. */
  get str(): Text { return new Text(this); }
  /** Date and time functions: `col('ts').dt.truncate('1h')`. */
  get dt(): Time { return new Time(this); }
  /** Nested records' fields: `col('user').struct.field('id')` (named `id`). */
  get struct(): Struct { return new Struct(this); }
  /** List functions, of `str.split`'s lists: `col('path').str.split('/').list.get(1)`. */
  get list(): List { return new List(this); }

  private unary(op: 'not' | 'is-null' | 'is-not-null' | 'neg'): Expr {
    return new Expr([...this.nodes, { tag: 'unary', val: [op, this.nodes.length - 1] }], this.name);
  }

  private binary(op: BinaryOp, other: Expr | Value): Expr {
    const [nodes, [a, b]] = joined([this, other]);
    return new Expr([...nodes, { tag: 'binary', val: [op, a, b] }], this.name);
  }
}

/** The operands' nodes one after the other (each one's indices moved past those before), and where each one's value is. */
function joined(operands: (Expr | Value)[]): [Node[], number[]] {
  const nodes: Node[] = [];
  const at: number[] = [];
  for (const operand of operands) {
    const base = nodes.length;
    for (const node of (operand instanceof Expr ? operand : lit(operand)).nodes) {
      switch (node.tag) {
        case 'unary':
          nodes.push({ tag: 'unary', val: [node.val[0], node.val[1] + base] });
          break;
        case 'binary':
          nodes.push({ tag: 'binary', val: [node.val[0], node.val[1] + base, node.val[2] + base] });
          break;
        case 'call':
          nodes.push({ tag: 'call', val: [node.val[0], node.val[1].map((i) => i + base)] });
          break;
        default:
          nodes.push(node);
      }
    }
    at.push(nodes.length - 1);
  }
  return [nodes, at];
}

/** The kernels' function `name` of `subject` and `args` (named after the subject). */
function call(name: string, subject: Expr, ...args: (Expr | Value)[]): Expr {
  const [nodes, at] = joined([subject, ...args]);
  return new Expr([...nodes, { tag: 'call', val: [name, at] }], subject.name);
}

/** `col(…).str`: text functions, each keeping nulls null. Patterns are regular expressions (Rust's syntax). */
export class Text {
  /** @internal */
  constructor(private readonly e: Expr) {}
  /** Whether the text matches `pattern` (a regular expression, or plain text when `literal`). */
  contains(pattern: string, literal = false): Expr { return call('str.contains', this.e, pattern, literal); }
  startsWith(prefix: string): Expr { return call('str.starts_with', this.e, prefix); }
  endsWith(suffix: string): Expr { return call('str.ends_with', this.e, suffix); }
  /** Group `group` of `pattern`'s first match; null where it does not match. */
  extract(pattern: string, group = 1): Expr { return call('str.extract', this.e, pattern, group); }
  /** The first match of `pattern` replaced by `value` (`$1` is its first group unless `literal`). */
  replace(pattern: string, value: string, literal = false): Expr { return call('str.replace', this.e, pattern, value, literal); }
  /** Every match of `pattern` replaced by `value`. */
  replaceAll(pattern: string, value: string, literal = false): Expr { return call('str.replace_all', this.e, pattern, value, literal); }
  /** `length` characters from `offset` (from the end when negative); to the end without `length`. */
  slice(offset: number, length?: number): Expr { return call('str.slice', this.e, offset, length ?? null); }
  toLowerCase(): Expr { return call('str.to_lowercase', this.e); }
  toUpperCase(): Expr { return call('str.to_uppercase', this.e); }
  /** Without leading and trailing whitespace, or the characters in `characters`. */
  stripChars(characters?: string): Expr { return call('str.strip_chars', this.e, characters ?? null); }
  /** Its length in characters. */
  lenChars(): Expr { return call('str.len_chars', this.e); }
  /** The text cut at every `by` (plain text), as a list: `'a/b'` split at `'/'` is `['a', 'b']`. */
  split(by: string): Expr { return call('str.split', this.e, by); }
  /** Its length in UTF-8 bytes. */
  lenBytes(): Expr { return call('str.len_bytes', this.e); }
}

/** `expr.struct`: the fields of nested records (Avro, Protobuf, JSON objects). */
export class Struct {
  /** @internal */
  constructor(private readonly e: Expr) {}
  /** The field `name` of each record (null where the record is), named `name`. */
  field(name: string): Expr { return call('struct.field', this.e, name).alias(name); }
}

/** `expr.list`: functions of list values (`str.split` makes them). */
export class List {
  /** @internal */
  constructor(private readonly e: Expr) {}
  /** The item at `index` (from the end when negative); out of a list's bounds an error, or null with `nullOnOob`. */
  get(index: number, nullOnOob = false): Expr { return call('list.get', this.e, index, nullOnOob); }
  /** How many items the list holds. */
  len(): Expr { return call('list.len', this.e); }
}

/** `col(…).dt`: parts of dates and times, and truncation to an interval. */
export class Time {
  /** @internal */
  constructor(private readonly e: Expr) {}
  year(): Expr { return call('dt.year', this.e); }
  month(): Expr { return call('dt.month', this.e); }
  day(): Expr { return call('dt.day', this.e); }
  hour(): Expr { return call('dt.hour', this.e); }
  minute(): Expr { return call('dt.minute', this.e); }
  second(): Expr { return call('dt.second', this.e); }
  /** 1 (Monday) to 7 (Sunday). */
  weekday(): Expr { return call('dt.weekday', this.e); }
  /** 1 to 366. */
  ordinalDay(): Expr { return call('dt.ordinal_day', this.e); }
  /** Rounded down to a multiple of `every` since the epoch, in UTC: `'1d'`, `'6h'`, `'15m'`, `'30s'`, `'500ms'`. */
  truncate(every: string): Expr { return call('dt.truncate', this.e, every); }
}

/**
 * `when(cond).then(a).otherwise(b)`: `a` where `cond` holds, `b` where it is
 * false or null (null without `otherwise`); `.when(…).then(…)` chains more.
 */
export function when(condition: Expr): { then(value: Expr | Value): Then } {
  return { then: (value) => new Then([[condition, value]]) };
}

type Branch = [Expr, Expr | Value];

/** A `when(…).then(…)`, an expression (null where no condition holds) until `otherwise` says what else. */
export class Then extends Expr {
  /** @internal */
  constructor(private readonly branches: Branch[]) {
    const chosen = chain(branches, null);
    super(chosen.nodes, chosen.name);
  }

  when(condition: Expr): { then(value: Expr | Value): Then } {
    return { then: (value) => new Then([...this.branches, [condition, value]]) };
  }

  otherwise(value: Expr | Value): Expr {
    return chain(this.branches, value);
  }
}

/** The branches as nested `when`s, named after the first branch's value. */
function chain(branches: Branch[], otherwise: Expr | Value): Expr {
  let chosen: Expr | Value = otherwise;
  for (const [condition, value] of [...branches].reverse()) chosen = call('when', condition, value, chosen);
  const first = branches[0][1];
  return new Expr((chosen as Expr).nodes, first instanceof Expr ? first.name : undefined);
}

type BinaryOp = Extract<Node, { tag: 'binary' }>['val'][0];

/** The column `name`. */
export function col(name: string): Expr {
  return new Expr([{ tag: 'column', val: name }], name);
}

/** A literal value: a whole number is an integer (read as the other operand's type where it fits). */
export function lit(value: Value): Expr {
  return new Expr([{ tag: 'literal', val: literal(value) }]);
}

function literal(value: Value): Literal {
  if (value === null || value === undefined) return { tag: 'null' };
  switch (typeof value) {
    case 'boolean':
      return { tag: 'boolean', val: value };
    case 'bigint':
      return { tag: 'int', val: value };
    case 'number':
      return Number.isSafeInteger(value) ? { tag: 'int', val: BigInt(value) } : { tag: 'float', val: value };
    case 'string':
      return { tag: 'text', val: value };
  }
  throw new InvalidInput(`lit(${String(value)}): a literal is a number, bigint, string, boolean or null`);
}

/** A kernel's refusal, which names the expression, as invalid input. */
function kernel<T>(work: () => T): T {
  try {
    return work();
  } catch (e) {
    const payload = (e as { payload?: unknown }).payload;
    throw new InvalidInput(typeof payload === 'string' ? payload : String(e));
  }
}

/** A table held by the kernels. */
export class Frame {
  /** @internal */
  constructor(private readonly kernel: Kernel) {}

  /** @internal The kernels' handle. */
  get handle(): Kernel {
    return this.kernel;
  }

  /** The frame an Arrow IPC stream holds. */
  static fromIpc(bytes: Uint8Array): Frame {
    return new Frame(kernel(() => Kernel.fromIpc(bytes)));
  }

  /** How many rows it has. */
  get height(): number {
    return Number(this.kernel.numRows());
  }

  /** Its columns' names, in order. */
  get columns(): string[] {
    return this.kernel.columnNames();
  }

  /** The rows where `predicate` holds (null counts as false). */
  filter(predicate: Expr): Frame {
    return new Frame(kernel(() => this.kernel.filter(nodes(predicate))));
  }

  /**
   * The frame with each expression added as a column (named by its `alias`,
   * else by the column it starts from), or replacing the column of that name;
   * `{ name: expr }` names them too. All are of the frame as it was.
   */
  withColumns(...columns: (Expr | Record<string, Expr>)[]): Frame {
    return new Frame(kernel(() => this.kernel.withColumns(named(columns))));
  }

  /** Only the columns named, in that order. */
  select(...names: string[]): Frame {
    return new Frame(kernel(() => this.kernel.select(names)));
  }

  /** The frame with columns renamed: `{ ts: 'clicked_at' }`. */
  rename(names: Record<string, string>): Frame {
    return new Frame(kernel(() => this.kernel.rename(Object.entries(names))));
  }

  /** The frame without the columns named. */
  drop(...names: string[]): Frame {
    return new Frame(kernel(() => this.kernel.drop(names)));
  }

  /** The rows ordered by each key (a column's name or an expression) in turn, nulls first. */
  sort(by: string | Expr | (string | Expr)[], options: { descending?: boolean | boolean[] } = {}): Frame {
    const keys = (Array.isArray(by) ? by : [by]).map((k) => (typeof k === 'string' ? col(k) : k));
    const flags = Array.isArray(options.descending) ? options.descending : keys.map(() => options.descending ?? false);
    if (flags.length !== keys.length) throw new InvalidInput(`sort: ${keys.length} keys but ${flags.length} descending flags`);
    return new Frame(kernel(() => this.kernel.sort(keys.map((k, i) => [nodes(k), flags[i]] as [Nodes, boolean]))));
  }

  /** `groupBy('country').agg(len(), col('duration_ms').mean())`: one row per distinct key, in the order each first appears. */
  groupBy(...keys: (string | Expr)[]): GroupBy {
    return new GroupBy(this.kernel, keys.map((k) => (typeof k === 'string' ? col(k) : k)));
  }

  /** Its first `n` rows (all but the last `-n` when negative). */
  head(n = 5): Frame {
    return this.slice(0, n >= 0 ? n : Math.max(this.height + n, 0));
  }

  /** Its last `n` rows (all but the first `-n` when negative). */
  tail(n = 5): Frame {
    const height = this.height;
    const count = n >= 0 ? n : Math.max(height + n, 0);
    return this.slice(Math.max(height - count, 0));
  }

  /** `length` rows from row `offset` (from the end when negative); to the end without `length`. */
  slice(offset: number, length?: number): Frame {
    const height = this.height;
    const from = offset < 0 ? Math.max(height + offset, 0) : offset;
    return new Frame(this.kernel.slice(BigInt(from), BigInt(length === undefined ? height : Math.max(length, 0))));
  }

  /** The first row of each distinct value of `subset`'s columns (of all columns without it), in the order they first appear. */
  unique(subset?: string | string[]): Frame {
    const names = subset === undefined ? [] : typeof subset === 'string' ? [subset] : subset;
    return new Frame(kernel(() => this.kernel.unique(names)));
  }

  /** The frame with a first column `name` numbering its rows from `offset` (UInt32). */
  withRowIndex(name = 'index', offset = 0): Frame {
    return new Frame(kernel(() => this.kernel.withRowIndex(name, offset)));
  }

  /** Its rows as apache-arrow's `Table`, the row-level API's. */
  toTable(): Table {
    return tableFromIPC(this.toIpc());
  }

  /** Its rows as plain objects, `{ column: value }` (int64 as bigint): for what expressions cannot do. */
  toRecords(): Record<string, unknown>[] {
    return this.toTable().toArray().map((row) => ({ ...row.toJSON() }));
  }

  /** Its rows as arrays of values, in the columns' order. */
  rows(): unknown[][] {
    const table = this.toTable();
    const columns = table.schema.fields.map((_, i) => table.getChildAt(i)!.toArray() as ArrayLike<unknown>);
    return Array.from({ length: table.numRows }, (_, r) => columns.map((c) => c[r]));
  }

  /** Row `index` (from the end when negative), as an array of values. */
  row(index: number): unknown[] {
    const height = this.height;
    const at = index < 0 ? height + index : index;
    if (at < 0 || at >= height) throw new RangeError(`row ${index} is out of a frame of ${height} rows`);
    return this.slice(at, 1).rows()[0];
  }

  /** The frame as an Arrow IPC stream (`write` takes the frame itself, and sends it without this copy). */
  toIpc(): Uint8Array {
    return this.kernel.toIpc();
  }

  /** Appends its rows to output table `table`, straight from the kernels to the host: `write(table, frame)`. */
  writeTo(table: string): void {
    this.kernel.write(table);
  }
}

/** A frame's rows by key, until `agg` says what to make of each group. */
export class GroupBy {
  /** @internal */
  constructor(
    private readonly kernel: Kernel,
    private readonly keys: Expr[],
  ) {}

  /** One row per group: its keys, then each aggregation (named by alias, or by the column it starts from). */
  agg(...aggregations: (Expr | Record<string, Expr>)[]): Frame {
    return new Frame(kernel(() => this.kernel.groupBy(named(this.keys), named(aggregations))));
  }
}

/** How many rows a group has: `groupBy(…).agg(len())`, named "len". */
export function len(): Expr {
  return new Expr([{ tag: 'call', val: ['len', []] }], 'len');
}

/** Each expression with its name: its alias, else the column it starts from, or the record's key. */
function named(columns: (Expr | Record<string, Expr>)[]): [string, Nodes][] {
  return columns.flatMap((c) =>
    c instanceof Expr
      ? [[c.name ?? unnamed(c), nodes(c)] as [string, Nodes]]
      : Object.entries(c).map(([name, e]) => [name, nodes(e)] as [string, Nodes]),
  );
}

function nodes(e: Expr): Nodes {
  return { nodes: e.nodes };
}

function unnamed(e: Expr): never {
  throw new InvalidInput(`an expression that starts from no column (${e.nodes.length} nodes) has no name: give it one with .alias('name')`);
}

/** The frames' rows one after the other (`pl.concat`): the same columns, by name and type, in the same order. */
export function concat(frames: Frame[]): Frame {
  if (frames.length === 0) throw new InvalidInput('concat needs at least one frame');
  if (frames.length === 1) return frames[0];
  return new Frame(kernel(() => Kernel.concat(frames.map((f) => f.handle))));
}

/** A frame of rows made in JavaScript (`{ column: value }` objects; types as apache-arrow's `tableFromJSON` infers them). */
export function fromRecords(records: Record<string, unknown>[]): Frame {
  return Frame.fromIpc(tableToIPC(tableFromJSON(records), 'stream'));
}

/** Each frame of `slot`, read from the host straight into the kernels as it is reached. */
export function* frames(slot: Slot): Generator<Frame> {
  for (;;) {
    const next = kernel(() => Kernel.readNext(slot.raw));
    if (next === undefined) return;
    yield new Frame(next);
  }
}
