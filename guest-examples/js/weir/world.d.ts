// The imports weir grants a publisher, as `wit/publisher.wit` (weir:publisher@0.2.1) declares them,
// and weir's columnar kernels (`wit/frames/kernels.wit`), which `weir plugin build` composes in.

declare module 'weir:publisher/host@0.2.1' {
  /** How loud a log line is; `error` lines are also surfaced in the run's summary. */
  export type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';
  /** Appends one line to this run's log. Cheap, never fails; lines past the log's cap are dropped and counted. */
  export function log(level: Level, message: string): void;
}

declare module 'weir:publisher/types@0.2.1' {
  /** One table frame: an Arrow IPC stream. */
  export type ArrowIpc = Uint8Array;
  /** The frames one source contributed to this batch, in order. */
  export interface Frames {
    /** How many frames there are in all, read or not. */
    count(): number;
    /** The next frame, or undefined once every frame has been read. */
    next(): ArrowIpc | undefined;
    /** The source these frames came from (a Kafka source's topic); empty without a declaration. */
    source(): string;
  }
  /** Why a publisher declined to produce output: thrown from `publish`. */
  export type PublishError = { tag: 'invalid-input'; val: string } | { tag: 'failed'; val: string };
}

declare module 'weir:publisher/output@0.2.1' {
  /** Appends rows (an Arrow IPC stream) to output table `name`; committed only if `publish` then returns. */
  export function write(name: string, data: Uint8Array): void;
  /** The output tables the publisher declares, in order; empty without a declaration. */
  export function tables(): string[];
}

declare module 'weir:frames/kernels@0.1.0' {
  import type { Frames } from 'weir:publisher/types@0.2.1';
  export type Literal =
    | { tag: 'null' }
    | { tag: 'boolean'; val: boolean }
    | { tag: 'int'; val: bigint }
    | { tag: 'float'; val: number }
    | { tag: 'text'; val: string };
  export type UnaryOp = 'not' | 'is-null' | 'is-not-null' | 'neg';
  export type BinaryOp = 'eq' | 'ne' | 'lt' | 'le' | 'gt' | 'ge' | 'and' | 'or' | 'add' | 'sub' | 'mul' | 'div';
  /** One node of an expression; operands are earlier nodes, by index. */
  export type Node =
    | { tag: 'column'; val: string }
    | { tag: 'literal'; val: Literal }
    | { tag: 'unary'; val: [UnaryOp, number] }
    | { tag: 'binary'; val: [BinaryOp, number, number] }
    /** A function by its Polars name (`when`, `fill_null`, `cast`, `str.*`, `list.*`, `struct.field`, `dt.*`): subject, then arguments. */
    | { tag: 'call'; val: [string, number[]] };
  /** An expression: its nodes, operands first; the last is its value. */
  export interface Expr {
    nodes: Node[];
  }
  /** A table held by the kernels. Methods throw (the error's `payload` says why) where the WIT returns an error. */
  export class Frame {
    static fromIpc(bytes: Uint8Array): Frame;
    /** The slot's next frame, read from the host into the kernels; undefined once all are read. */
    static readNext(slot: Frames): Frame | undefined;
    numRows(): bigint;
    columnNames(): string[];
    filter(predicate: Expr): Frame;
    withColumns(columns: [string, Expr][]): Frame;
    select(names: string[]): Frame;
    rename(names: [string, string][]): Frame;
    drop(names: string[]): Frame;
    slice(offset: bigint, length: bigint): Frame;
    unique(subset: string[]): Frame;
    withRowIndex(name: string, offset: number): Frame;
    /** The frames' rows one after the other; their columns must match. */
    static concat(frames: Frame[]): Frame;
    sort(by: [Expr, boolean][]): Frame;
    groupBy(keys: [string, Expr][], aggregations: [string, Expr][]): Frame;
    toIpc(): Uint8Array;
    /** Appends its rows to output table `table` (output.write, from the kernels). */
    write(table: string): void;
  }
}
