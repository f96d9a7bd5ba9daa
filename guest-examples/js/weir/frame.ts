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

  private unary(op: 'not' | 'is-null' | 'is-not-null' | 'neg'): Expr {
    return new Expr([...this.nodes, { tag: 'unary', val: [op, this.nodes.length - 1] }], this.name);
  }

  /** Both operands' nodes, the second's indices moved past the first's, then the operation's. */
  private binary(op: BinaryOp, other: Expr | Value): Expr {
    const right = other instanceof Expr ? other : lit(other);
    const at = this.nodes.length;
    const moved = right.nodes.map((node): Node => {
      switch (node.tag) {
        case 'unary':
          return { tag: 'unary', val: [node.val[0], node.val[1] + at] };
        case 'binary':
          return { tag: 'binary', val: [node.val[0], node.val[1] + at, node.val[2] + at] };
        default:
          return node;
      }
    });
    const nodes: Node[] = [...this.nodes, ...moved, { tag: 'binary', val: [op, at - 1, at + right.nodes.length - 1] }];
    return new Expr(nodes, this.name);
  }
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
  private constructor(private readonly kernel: Kernel) {}

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
    const named: [string, Nodes][] = columns.flatMap((c) =>
      c instanceof Expr
        ? [[c.name ?? unnamed(c), nodes(c)] as [string, Nodes]]
        : Object.entries(c).map(([name, e]) => [name, nodes(e)] as [string, Nodes]),
    );
    return new Frame(kernel(() => this.kernel.withColumns(named)));
  }

  /** Only the columns named, in that order. */
  select(...names: string[]): Frame {
    return new Frame(kernel(() => this.kernel.select(names)));
  }

  /** The frame as an Arrow IPC stream; `write` takes the frame itself. */
  toIpc(): Uint8Array {
    return this.kernel.toIpc();
  }
}

function nodes(e: Expr): Nodes {
  return { nodes: e.nodes };
}

function unnamed(e: Expr): never {
  throw new InvalidInput(`an expression that starts from no column (${e.nodes.length} nodes) has no name: give it one with .alias('name')`);
}

/** Each frame of `slot`, read into the kernels as it is reached. */
export function* frames(slot: Slot): Generator<Frame> {
  for (const bytes of slot.bytes()) yield Frame.fromIpc(bytes);
}
