// Write Almanac task plugins in TypeScript.
//
//   import * as almanac from "almanac-guest";
//
//   export const task = almanac.exportTask({
//     describe: () =>
//       new almanac.TaskInfo("daily-points", "0 0 * * *", "Asia/Shanghai")
//         .writes("accounts", "points_ledger")
//         .setting("points", "10", "points each account gets per day"),
//     plan: (slot, tx, after, limit) =>
//       tx.query("SELECT id FROM accounts WHERE id > $1 ORDER BY id LIMIT $2", after ?? -1, limit).map((r) => String(r.id)),
//     run(job, tx) { ... },
//   });
//
// `node guest-sdk/typescript/build.mjs plugin.ts -o plugin.wasm` builds it. The host treats
// the component like any other: same sandbox, limits, database role and statement policy.
import * as wit from "almanac:plugin/types@0.5.0";
import type { Transaction } from "almanac:plugin/db@0.5.0";
import { publish as outboxPublish } from "almanac:plugin/outbox@0.5.0";
import { log as hostLog } from "almanac:plugin/log@0.5.0";
import { get as configGet } from "almanac:plugin/config@0.5.0";
import { today as businessToday, type BusinessDay } from "almanac:plugin/business@0.5.0";
import { enqueue as jobsEnqueue } from "almanac:plugin/jobs@0.5.0";

/** Why a call failed: stored as the job's last error; `retryable` says whether to try again.
 * Any other error thrown out of `plan` or `run` is retryable, as a Rust panic is. */
export class TaskError extends globalThis.Error {
  readonly retryable: boolean;
  constructor(message: string, retryable: boolean) {
    super(message);
    this.name = "TaskError";
    this.retryable = retryable;
  }
  /** A failure no retry mends (bad input): the job fails at once. */
  static permanent(message: unknown): TaskError {
    return new TaskError(String(message), false);
  }
  /** A failure worth another attempt, after the backoff. */
  static retryable(message: unknown): TaskError {
    return new TaskError(String(message), true);
  }
}
/** `almanac.Error.permanent("...")`, as in the Python SDK. */
export { TaskError as Error };

/** A statement failed (with its SQLSTATE) or the host refused it (without). */
export class DbError extends TaskError {
  readonly sqlstate?: string;
  constructor(error: wit.DbError) {
    super((error.sqlstate ? `database error ${error.sqlstate}: ` : "") + error.message, error.retryable);
    this.name = "DbError";
    this.sqlstate = error.sqlstate;
  }
}

/** A `numeric` parameter or value, as its exact decimal text (`new Numeric("12.30")`). */
export class Numeric {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

/** A parameter: null/undefined, boolean, number (a whole one is sent as an integer, which
 * also fits a float column), bigint, string, Uint8Array, Date, Numeric, or an object or
 * array (sent as JSON). */
export type Param = null | undefined | boolean | number | bigint | string | Uint8Array | Date | Numeric | object;

/** A column's value: null, boolean, number (a bigint past 2^53), string, Uint8Array, Date
 * (a timestamp, to the millisecond), the parsed JSON, or a numeric's text. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Row = Record<string, any>;

/** One business period: `start`/`end` as Dates, `startMicros`/`endMicros` exactly, `label`
 * (= `period`: the period's name in the business zone, e.g. "2026-11" for a monthly task,
 * the same across schedule changes), `zone`. */
export class Slot {
  readonly start: Date;
  readonly end: Date;
  readonly startMicros: bigint;
  readonly endMicros: bigint;
  readonly label: string;
  readonly period: string;
  readonly zone: string;
  constructor(slot: wit.Slot) {
    this.startMicros = slot.start;
    this.endMicros = slot.end;
    this.start = fromMicros(slot.start);
    this.end = fromMicros(slot.end);
    this.label = slot.label;
    this.period = slot.label;
    this.zone = slot.zone;
  }
}

/** One unit of work: `task`, `slot`, `period` (what to key ledgers and outbox messages by),
 * `key`, `attempt` and the parsed JSON `payload` (or undefined). */
export class Job {
  readonly task: string;
  readonly slot: Slot;
  readonly period: string;
  readonly key: string;
  readonly attempt: number;
  readonly payload: unknown;
  constructor(job: wit.Job) {
    this.task = job.task;
    this.slot = new Slot(job.slot);
    this.period = this.slot.period;
    this.key = job.key;
    this.attempt = job.attempt;
    this.payload = job.payload === undefined ? undefined : JSON.parse(job.payload);
  }
}

/** What `enqueue` may add to a job's identity. */
export interface EnqueueOptions {
  /** Handed to the job as its payload (sent as JSON). */
  payload?: unknown;
  /** Not before this instant. */
  runAfter?: Date;
}

/** The transaction the call is lent: the job's own, committed with it or rolled back. */
export class Tx {
  constructor(private readonly tx: Transaction) {}

  /** The rows, each an object by column name. */
  query(sql: string, ...params: Param[]): Row[] {
    const rows = call(() => this.tx.query(sql, params.map(toValue)));
    return rows.rows.map((values) => {
      const row: Row = {};
      rows.columns.forEach((column, i) => (row[column] = fromValue(values[i])));
      return row;
    });
  }

  /** The one row the statement returns (a TaskError, permanent, if it returns another count). */
  queryOne(sql: string, ...params: Param[]): Row {
    const rows = this.query(sql, ...params);
    if (rows.length !== 1) throw TaskError.permanent(`expected one row, got ${rows.length}: ${sql}`);
    return rows[0];
  }

  /** The number of rows the statement affected. */
  execute(sql: string, ...params: Param[]): number {
    return Number(call(() => this.tx.execute(sql, params.map(toValue))));
  }

  /** Write a message into the outbox in this transaction; false if (topic, key) existed.
   * An object payload is sent as JSON (JSON.stringify), a string as UTF-8, bytes as they are. */
  publish(topic: string, key: string, payload: unknown, contentType = "application/json"): boolean {
    const body =
      payload instanceof Uint8Array ? payload : new TextEncoder().encode(typeof payload === "string" ? payload : JSON.stringify(payload));
    return call(() => outboxPublish(this.tx, topic, key, body, contentType)) === "published";
  }

  /** Enqueue one job of another task in this transaction; false if it existed. `slot` is
   * an instant of its business period: derive it from the current job (`job.slot.start`),
   * never from the clock, so that a retry names the same job. The task must be one
   * `TaskInfo.enqueues` names. */
  enqueue(task: string, slot: Date | bigint, key: string, options: EnqueueOptions = {}): boolean {
    const payload = options.payload === undefined ? undefined : JSON.stringify(options.payload);
    const runAfter = options.runAfter === undefined ? undefined : toMicros(options.runAfter);
    return call(() => jobsEnqueue(this.tx, { task, slot: typeof slot === "bigint" ? slot : toMicros(slot), key, payload, runAfter }));
  }
}

type CatchUp = { tag: "all" } | { tag: "latest" } | { tag: "window"; val: bigint };

interface Info {
  name: string;
  version: string;
  schedule?: string;
  zone: string;
  catchUp: CatchUp;
  maxAttempts: number;
  timeoutMs: number;
  tables: { name: string; access: "read" | "write" }[];
  setup: string[];
  settings: { name: string; default?: string; doc: string }[];
  calls: string[];
  enqueues: string[];
  reuse: number;
}

/** The task's identity and defaults (WIT `task-info`), built step by step. Defaults: catch
 * up all missed slots, 5 attempts, 30 s per call, no tables, no setup, no settings. */
export class TaskInfo {
  readonly info: Info;
  constructor(name: string, schedule: string | undefined, zone = "UTC") {
    this.info = {
      name,
      version: "0.0.0",
      schedule,
      zone,
      catchUp: { tag: "all" },
      maxAttempts: 5,
      timeoutMs: 30_000,
      tables: [],
      setup: [],
      settings: [],
      calls: [],
      enqueues: [],
      reuse: 0,
    };
  }
  /** A task without a schedule: its jobs come only from enqueues. */
  static onDemand(name: string): TaskInfo {
    return new TaskInfo(name, undefined);
  }
  version(version: string): this {
    this.info.version = version;
    return this;
  }
  zone(zone: string): this {
    this.info.zone = zone;
    return this;
  }
  /** "all", "latest", or "window" with the window in seconds. */
  catchUp(policy: "all" | "latest" | "window", windowSeconds = 0): this {
    this.info.catchUp = policy === "window" ? { tag: "window", val: BigInt(windowSeconds) } : { tag: policy };
    return this;
  }
  maxAttempts(attempts: number): this {
    this.info.maxAttempts = attempts;
    return this;
  }
  timeoutMs(ms: number): this {
    this.info.timeoutMs = ms;
    return this;
  }
  reads(...tables: string[]): this {
    return this.tables(tables, "read");
  }
  writes(...tables: string[]): this {
    return this.tables(tables, "write");
  }
  private tables(tables: string[], access: "read" | "write"): this {
    for (const name of tables) {
      this.info.tables = this.info.tables.filter((t) => t.name !== name).concat([{ name, access }]);
    }
    return this;
  }
  /** Let one instance run up to `jobs` jobs of this task in a row instead of a fresh one
   * per job (SpiderMonkey started once, not per job). What a job leaves in the instance (a
   * module-level variable, a cache, a global) is then seen by the next jobs it runs:
   * declare it only when a job depends on nothing but its arguments and the database. The
   * host starts a fresh instance after `jobs` jobs, after any job that fails, and when its
   * memory has grown past half the cap. */
  reuse(jobs: number): this {
    this.info.reuse = jobs;
    return this;
  }
  /** The tasks whose jobs this plugin enqueues (`tx.enqueue`): its role may enqueue into
   * these and no others. */
  enqueues(...tasks: string[]): this {
    this.info.enqueues.push(...tasks.filter((t) => !this.info.enqueues.includes(t)));
    return this;
  }
  /** Functions of the database the plugin's SQL calls beyond the host's built-in allowlist,
   * each with its schema ("public.credit"). */
  calls(...functions: string[]): this {
    this.info.calls.push(...functions.filter((f) => !this.info.calls.includes(f)));
    return this;
  }
  /** Statements run (as the task's role) before its first job: CREATE TABLE IF NOT EXISTS … */
  setup(...statements: string[]): this {
    this.info.setup = statements;
    return this;
  }
  /** A setting the operator may give (`[tasks.<name>.settings]`), with its default. */
  setting(name: string, defaultValue: string, doc: string): this {
    this.info.settings.push({ name, default: defaultValue, doc });
    return this;
  }
  /** A setting the operator must give: the host does not start the task without it. */
  requiredSetting(name: string, doc: string): this {
    this.info.settings.push({ name, doc });
    return this;
  }
}

/** What a plugin provides: `describe`, `plan` (optional: the default plans no keys) and `run`. */
export interface Task {
  describe(): TaskInfo;
  plan?(slot: Slot, tx: Tx, after: string | undefined, limit: number): string[];
  run(job: Job, tx: Tx): void;
}

/** The object the component exports as `task`: `export const task = exportTask({...})`. */
export function exportTask(plugin: Task) {
  return {
    describe: () => plugin.describe().info,
    plan: (slot: wit.Slot, tx: Transaction, afterKey: string | undefined, limit: number): string[] =>
      failing(() => (plugin.plan ? plugin.plan(new Slot(slot), new Tx(tx), afterKey, limit) : [])),
    run: (job: wit.Job, tx: Transaction): void => failing(() => plugin.run(new Job(job), new Tx(tx))),
  };
}

/** The operator's settings (`[tasks.<name>.settings]`). */
export const config = {
  get: (name: string): string | undefined => configGet(name),
};

/** The business day of the slot the current `plan` or `run` is for (holiday calendars):
 * undefined for a task without them. */
export const business = {
  today: (): BusinessDay | undefined => businessToday(),
};

/** Lines in the host's log, under the job's task, slot and key. */
export const log = {
  debug: (message: string) => hostLog("debug", message),
  info: (message: string) => hostLog("info", message),
  warn: (message: string) => hostLog("warn", message),
  error: (message: string) => hostLog("error", message),
};

// console.* reaches the host's log, as a Node developer expects it to.
const show = (args: unknown[]) => args.map((a) => (typeof a === "string" ? a : safeJson(a))).join(" ");
console.log = (...args: unknown[]) => log.info(show(args));
console.info = console.log;
console.debug = (...args: unknown[]) => log.debug(show(args));
console.warn = (...args: unknown[]) => log.warn(show(args));
console.error = (...args: unknown[]) => log.error(show(args));

function safeJson(value: unknown): string {
  if (value instanceof globalThis.Error) return `${value.name}: ${value.message}`;
  try {
    return JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v)) ?? String(value);
  } catch {
    return String(value);
  }
}

/** A host call whose `result` error componentize-js throws (as a ComponentError with the
 * error as `payload`), turned into a DbError. */
function call<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    const payload = (e as { payload?: wit.DbError })?.payload;
    if (payload && typeof payload.message === "string") throw new DbError(payload);
    throw e;
  }
}

/** Run a plugin's call; anything it throws becomes the WIT `task-error` (thrown, with the
 * error as `payload`, as componentize-js expects of an export returning `result`). */
function failing<T>(f: () => T): T {
  try {
    const returned = f();
    // The host's calls answer at once (tx.query returns its rows): an async plan or run
    // would return before its awaits ran, and its errors would be lost.
    if (typeof (returned as { then?: unknown })?.then === "function") {
      throw TaskError.permanent("plan or run returned a Promise: write it as a plain function (tx.query and tx.execute return their results, no await)");
    }
    return returned;
  } catch (e) {
    const error =
      e instanceof TaskError
        ? { message: e.message, retryable: e.retryable }
        : { message: e instanceof globalThis.Error ? `${e.name}: ${e.message}` : `thrown: ${safeJson(e)}`, retryable: true };
    throw { payload: error };
  }
}

function toValue(p: Param): wit.Value {
  if (p === null || p === undefined) return { tag: "null" };
  if (typeof p === "boolean") return { tag: "boolean", val: p };
  if (typeof p === "number") return Number.isSafeInteger(p) ? { tag: "int", val: BigInt(p) } : { tag: "float", val: p };
  if (typeof p === "bigint") return { tag: "int", val: p };
  if (typeof p === "string") return { tag: "text", val: p };
  if (p instanceof Uint8Array) return { tag: "bytes", val: p };
  if (p instanceof Date) return { tag: "timestamp", val: toMicros(p) };
  if (p instanceof Numeric) return { tag: "numeric", val: p.text };
  return { tag: "json", val: JSON.stringify(p) };
}

function fromValue(v: wit.Value): unknown {
  switch (v.tag) {
    case "null":
      return null;
    case "int":
      return v.val >= BigInt(Number.MIN_SAFE_INTEGER) && v.val <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v.val) : v.val;
    case "timestamp":
      return fromMicros(v.val);
    case "json":
      return JSON.parse(v.val);
    default:
      return v.val;
  }
}

function toMicros(date: Date): bigint {
  const ms = date.getTime();
  if (Number.isNaN(ms)) throw TaskError.permanent("an invalid Date has no SQL form");
  return BigInt(ms) * 1000n;
}

function fromMicros(micros: bigint): Date {
  return new Date(Number(micros / 1000n));
}
