// The imports of world `task-plugin` of `almanac:plugin@0.5.0` (wit/almanac.wit), as
// componentize-js binds them: kebab-case names become camelCase, s64 is a bigint, an
// option is a value or undefined, a variant is `{ tag, val }`, and a function returning
// `result` throws a ComponentError whose `payload` is the error.

declare module "almanac:plugin/types@0.5.0" {
  export type Value =
    | { tag: "null" }
    | { tag: "boolean"; val: boolean }
    | { tag: "int"; val: bigint }
    | { tag: "float"; val: number }
    | { tag: "text"; val: string }
    | { tag: "bytes"; val: Uint8Array }
    | { tag: "timestamp"; val: bigint }
    | { tag: "json"; val: string }
    | { tag: "numeric"; val: string };
  export interface Rows {
    columns: string[];
    rows: Value[][];
  }
  export interface DbError {
    sqlstate?: string;
    message: string;
    retryable: boolean;
  }
  export interface Slot {
    start: bigint;
    end: bigint;
    label: string;
    zone: string;
  }
  export interface Job {
    task: string;
    slot: Slot;
    key: string;
    attempt: number;
    payload?: string;
  }
}

declare module "almanac:plugin/db@0.5.0" {
  import type { Value, Rows } from "almanac:plugin/types@0.5.0";
  export class Transaction {
    query(sql: string, params: Value[]): Rows;
    execute(sql: string, params: Value[]): bigint;
  }
}

declare module "almanac:plugin/outbox@0.5.0" {
  import type { Transaction } from "almanac:plugin/db@0.5.0";
  export function publish(tx: Transaction, topic: string, key: string, payload: Uint8Array, contentType: string): "published" | "already-published";
}

declare module "almanac:plugin/log@0.5.0" {
  export function log(level: "trace" | "debug" | "info" | "warn" | "error", message: string): void;
}

declare module "almanac:plugin/config@0.5.0" {
  export function get(name: string): string | undefined;
}

declare module "almanac:plugin/business@0.5.0" {
  export interface BusinessDay {
    nominal: string;
    date: string;
    dayOfMonth: number;
    lastOfMonth: boolean;
    calendars: string[];
  }
  export function today(): BusinessDay | undefined;
}

declare module "almanac:plugin/jobs@0.5.0" {
  import type { Transaction } from "almanac:plugin/db@0.5.0";
  export interface NewJob {
    task: string;
    slot: bigint;
    key: string;
    payload?: string;
    runAfter?: bigint;
  }
  export function enqueue(tx: Transaction, job: NewJob): boolean;
}
