// Test an Almanac TypeScript plugin from its own project, with `node --test`, at three levels:
//
//   // The source against a fake transaction (milliseconds; no database, no component):
//   const plugin = await loadPlugin("src/plugin.ts", { settings: { greeting: "hi" } });
//   const tx = new FakeTx(() => ({ affected: 1 }));
//   plugin.run({ slot: "2026-01-01T06:00:00Z", period: "2026-01-01", key: "run" }, tx);
//   assert.deepEqual(tx.statements[0].params, ["2026-01-01", "hi", new Date("2026-01-01T06:00:00Z")]);
//
//   // The built component under node (jco transpile), its host imports faked alike:
//   const component = await loadComponent("hello.wasm", { settings: { greeting: "hi" } });
//
//   // The built component in the real host against a fresh database:
//   const almanac = new Almanac({ build: ["sh", "build.sh"], plugins: "hello.wasm" });
//   almanac.sql("CREATE TABLE accounts (id int PRIMARY KEY)");
//   assert.ok(almanac.run("hello", "2026-01-01T06:00:00Z", "run").ok);
//   assert.deepEqual(almanac.query("SELECT greeting FROM hello_runs"), [["hello"]]);
//
// `Almanac` is the Rust and Python harnesses' equivalent: each is a new database in a
// private PostgreSQL cluster under the project's `.almanac/` (`almanac scratch`), and the
// plugin runs through `almanac try --commit` / `almanac plan`, loaded, sandboxed and
// confined to its role exactly as a host does it. The `almanac` binary is `$ALMANAC`, else
// the one built in the checkout this file comes from, else `almanac` on PATH.
import { build } from "esbuild";
import { transpile } from "@bytecodealliance/jco";
import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
let loads = 0;

// ---------------------------------------------------------------- the source, faked host

/** A transaction that runs nothing: each statement is kept in `statements` ({ sql, params },
 * the parameters as the plugin gave them after the SDK's conversion), and `respond(sql,
 * params)` says what it returns: `{ rows: [{ column: value }], affected }`, or throws. */
export class FakeTx {
  constructor(respond = () => ({})) {
    this.respond = respond;
    this.statements = [];
    this.published = [];
    this.enqueued = [];
  }
}

/** The plugin's source bundled with the SDK, its host imports faked: `settings` answer
 * `config.get`, `today` is `business.today()`, log lines land in `logs`. Returns
 * `{ describe(), plan(slot, tx, after, limit), run(job, tx), logs }`, where a slot is
 * `{ start, end?, label?, zone? }` (instants as Dates or RFC 3339 text) and a job
 * `{ slot, period?, key, attempt?, payload? }`. A call that fails throws the task error
 * (`{ message, retryable }`). */
export async function loadPlugin(entry, { settings = {}, today } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "almanac-test-"));
  const out = join(dir, "plugin.mjs");
  const host = { settings, today, logs: [] };
  try {
    await build({
      entryPoints: [resolve(entry)],
      bundle: true,
      format: "esm",
      platform: "neutral",
      target: "es2022",
      outfile: out,
      alias: { "almanac-guest": join(here, "src/index.ts") },
      plugins: [fakeImports],
      logLevel: "warning",
    });
    return await wrap(pathToFileURL(out).href, host, (fake) => new FakeTransaction(fake));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The built component under node: `jco transpile` turns it into JavaScript and its
 * WebAssembly, run by node's engine instead of wasmtime, its `almanac:plugin/*` imports
 * faked as for `loadPlugin` and WASI given by jco's preview2-shim. What it checks beyond
 * the source: the component exports the task, builds from this source, and behaves the
 * same once compiled. Returns what `loadPlugin` returns. */
export async function loadComponent(wasm, { settings = {}, today } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "almanac-component-"));
  const host = { settings, today, logs: [] };
  try {
    // The transpiled code imports jco's WASI shim by name: resolved from the SDK's packages.
    symlinkSync(join(here, "node_modules"), join(dir, "node_modules"));
    const fakes = join(dir, "fakes");
    mkdirSync(fakes);
    for (const [iface, code] of Object.entries(fakeModules())) writeFileSync(join(fakes, `${iface}.js`), code);
    const { files } = await transpile(readFileSync(wasm), { name: "plugin", map: { "almanac:plugin/*": "./fakes/*.js" }, quiet: true });
    for (const [name, bytes] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, name)), { recursive: true });
      writeFileSync(join(dir, name), bytes);
    }
    writeFileSync(join(dir, "package.json"), '{"type": "module"}');
    const { Transaction } = await import(pathToFileURL(join(fakes, "db.js")).href);
    return await wrap(pathToFileURL(join(dir, "plugin.js")).href, host, (fake) => new Transaction(fake));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// Import the module exporting `task` with `host` as the fake host, and give its calls the
// plain shapes of loadPlugin (slots and jobs as dates and text, errors as thrown payloads).
async function wrap(url, host, transaction) {
  globalThis.__almanacFakeHost = host;
  // The SDK sends console.* to the host's log: the plugin's, not the test's.
  const methods = ["log", "info", "debug", "warn", "error"];
  const tests = Object.fromEntries(methods.map((m) => [m, console[m]]));
  const { task } = await import(`${url}?${loads++}`);
  const plugins = Object.fromEntries(methods.map((m) => [m, console[m]]));
  Object.assign(console, tests);
  const micros = (t) => BigInt(new Date(t).getTime()) * 1000n;
  // A slot given as an instant alone, or as { start, end?, label?, zone? }.
  const given = (s) => (typeof s === "object" && !(s instanceof Date) ? s : { start: s });
  const slotOf = (slot, label) => {
    const s = given(slot);
    return { start: micros(s.start), end: micros(s.end ?? s.start), label: label ?? s.label ?? String(s.start), zone: s.zone ?? "UTC" };
  };
  // Each call sees its own fake host and console, whatever other plugins a test loaded.
  const unwrap = (f) => {
    globalThis.__almanacFakeHost = host;
    Object.assign(console, plugins);
    try {
      return f();
    } catch (e) {
      throw e?.payload ?? e;
    } finally {
      Object.assign(console, tests);
    }
  };
  return {
    logs: host.logs,
    describe: () => unwrap(() => task.describe()),
    plan: (slot, tx, after, limit = 100) => unwrap(() => task.plan(slotOf(slot), transaction(tx), after, limit)),
    run: (job, tx) =>
      unwrap(() =>
        task.run(
          {
            task: task.describe().name,
            slot: slotOf(job.slot, job.period),
            key: job.key,
            attempt: job.attempt ?? 1,
            payload: job.payload === undefined ? undefined : JSON.stringify(job.payload),
          },
          transaction(tx),
        ),
      ),
  };
}

// The WIT transaction resource, answering from a FakeTx.
export class FakeTransaction {
  constructor(fake) {
    this.fake = fake;
  }
  query(sql, params) {
    return this.answer(sql, params, (r) => {
      const rows = r.rows ?? [];
      const columns = rows.length ? Object.keys(rows[0]) : [];
      return { columns, rows: rows.map((row) => columns.map((c) => toValue(row[c]))) };
    });
  }
  execute(sql, params) {
    return this.answer(sql, params, (r) => BigInt(r.affected ?? 0));
  }
  answer(sql, params, shape) {
    const given = params.map(fromValue);
    this.fake.statements.push({ sql, params: given });
    try {
      return shape(this.fake.respond(sql, given) ?? {});
    } catch (e) {
      throw { payload: { sqlstate: e.sqlstate, message: e.message ?? String(e), retryable: !!e.retryable } };
    }
  }
}

// The `almanac:plugin` interfaces, answered by the fake host (`globalThis.__almanacFakeHost`).
function fakeModules() {
  const host = "globalThis.__almanacFakeHost";
  return {
    types: "export {};",
    db: `import { FakeTransaction } from ${JSON.stringify(import.meta.url)};
      export class Transaction extends FakeTransaction {}`,
    log: `export function log(level, message) { ${host}.logs.push({ level, message }); }`,
    config: `export function get(name) { return ${host}.settings[name]; }`,
    business: `export function today() { return ${host}.today; }`,
    outbox: `export function publish(tx, topic, key, payload, contentType) {
      const seen = tx.fake.published.some((m) => m.topic === topic && m.key === key);
      if (!seen) tx.fake.published.push({ topic, key, payload: new TextDecoder().decode(payload), contentType });
      return seen ? "already-published" : "published"; }`,
    jobs: `export function enqueue(tx, job) {
      const seen = tx.fake.enqueued.some((j) => j.task === job.task && j.slot === job.slot && j.key === job.key);
      if (!seen) tx.fake.enqueued.push(job);
      return !seen; }`,
  };
}

// `almanac:plugin/<interface>@<version>` imports of the source, answered by the fake host.
const fakeImports = {
  name: "almanac-fake-host",
  setup(b) {
    b.onResolve({ filter: /^almanac:plugin\// }, (args) => ({ path: args.path, namespace: "almanac-fake" }));
    b.onLoad({ filter: /.*/, namespace: "almanac-fake" }, (args) => {
      const iface = args.path.slice("almanac:plugin/".length).split("@")[0];
      // The source's SDK imports the transaction's type only.
      const modules = { ...fakeModules(), db: "export class Transaction {}" };
      if (!(iface in modules)) throw new Error(`no fake for almanac:plugin/${iface}`);
      return { contents: modules[iface], loader: "js" };
    });
  },
};

function toValue(v) {
  if (v === null || v === undefined) return { tag: "null" };
  if (typeof v === "boolean") return { tag: "boolean", val: v };
  if (typeof v === "number") return Number.isInteger(v) ? { tag: "int", val: BigInt(v) } : { tag: "float", val: v };
  if (typeof v === "bigint") return { tag: "int", val: v };
  if (typeof v === "string") return { tag: "text", val: v };
  if (v instanceof Date) return { tag: "timestamp", val: BigInt(v.getTime()) * 1000n };
  if (v instanceof Uint8Array) return { tag: "bytes", val: v };
  return { tag: "json", val: JSON.stringify(v) };
}

function fromValue(v) {
  switch (v.tag) {
    case "null":
      return null;
    case "int":
      return Number.isSafeInteger(Number(v.val)) ? Number(v.val) : v.val;
    case "timestamp":
      return new Date(Number(v.val / 1000n));
    case "json":
      return JSON.parse(v.val);
    default:
      return v.val;
  }
}

// ---------------------------------------------------------------- the component, real host

let databases = 0;
const built = new Set();

/** What a `run`, `plan` or `apply` did: `ok`, `keys` (for `plan`) and its report (for a dry
 * run, every statement the plugin sent, with its parameters and what it did). */
export class Tried {
  constructor(out) {
    this.report = (out.stdout ?? "") + (out.stderr ?? "");
    this.ok = out.status === 0;
    this.keys = this.report.split("\n").filter((l) => l.startsWith("  key: ")).map((l) => l.slice("  key: ".length));
  }
  toString() {
    return this.report;
  }
}

/** Run the build `command` in `project`, once per test process (and per project). */
export function buildOnce(command, { project = "." } = {}) {
  const key = [resolve(project), ...command].join("\0");
  if (!built.has(key)) {
    check(command, { cwd: resolve(project) });
    built.add(key);
  }
}

export class Almanac {
  /** A fresh database. `build` (a command, run once per test process in `project`) makes
   * the component(s) `plugins` names: one component file or a folder of them. */
  constructor({ build: command, plugins = ".", project = "." } = {}) {
    this.project = resolve(project);
    if (command) buildOnce(command, { project });
    this.plugins = resolve(this.project, plugins);
    this.bin = almanacBin();
    this.name = `almanac_test_${databases++}_${process.pid}`;
    const env = { ...process.env };
    delete env.DATABASE_URL;
    this.url = check([this.bin, "scratch", this.name], { cwd: this.project, env }).trim();
    this.config = undefined;
    this.given = {};
  }

  /** Give `task` these settings (as `[tasks.<task>.settings]` of almanac.toml would) for
   * this test's runs and plans from now on; later calls add to them. */
  settings(task, values) {
    this.given[task] = { ...this.given[task], ...values };
    const text = Object.entries(this.given)
      .map(([t, vs]) => `[tasks.${toml(t)}.settings]\n` + Object.entries(vs).map(([k, v]) => `${toml(k)} = ${toml(v)}\n`).join(""))
      .join("");
    const dir = join(this.project, ".almanac", "settings");
    mkdirSync(dir, { recursive: true });
    this.config = join(dir, `${this.name}.toml`);
    writeFileSync(this.config, text);
    return this;
  }

  /** `run` of job (task, slot, key), in a transaction committed if it succeeds. */
  run(task, slot, key, payload) {
    return this.call(["try", task, "--slot", slot, "--key", key, ...(payload === undefined ? [] : ["--payload", JSON.stringify(payload)])]);
  }

  /** `plan` of a slot (its keys in `keys`), committed if it succeeds. */
  plan(task, slot) {
    return this.call(["plan", task, "--slot", slot, "--limit", "100000"]);
  }

  /** Register the plugins' tasks as a deploy does (`almanac apply`), so that an enqueue into
   * another of them, and plan's "runs after" line, work as on a live database. */
  apply() {
    let plugins = this.plugins;
    if (statSync(plugins).isFile()) {
      const dir = join(this.project, ".almanac", "apply", this.name);
      mkdirSync(dir, { recursive: true });
      copyFileSync(plugins, join(dir, basename(plugins)));
      plugins = dir;
    }
    const config = this.config ? ["--config", this.config] : [];
    return new Tried(spawnSync(this.bin, ["apply", "--plugins", plugins, "--reason", "almanac-testing", ...config], this.options()));
  }

  /** Statements run as the database's owner (tables the plugin reads, rows to start from). */
  sql(sql) {
    this.psql(sql);
  }

  /** A query's rows, every value as psql prints it (NULL as "NULL", times in UTC). */
  query(sql) {
    return this.psql(sql)
      .split("\0")
      .filter((r) => r)
      .map((r) => r.split("\x1f"));
  }

  /** The jobs of `task`: [slot, key, payload, run_after, status] as psql prints them. */
  jobs(task) {
    const quoted = task.replaceAll("'", "''");
    return this.query(`SELECT slot, key, coalesce(payload::text, 'NULL'), run_after, status FROM almanac.jobs WHERE task = '${quoted}' ORDER BY slot, key`);
  }

  call(args) {
    const config = this.config ? ["--config", this.config] : [];
    return new Tried(spawnSync(this.bin, [...args, "--plugins", this.plugins, "--commit", ...config], this.options()));
  }

  psql(sql) {
    const args = ["psql", "--", "-X", "-q", "-A", "-t", "-0", "-F", "\x1f", "-P", "null=NULL", "-v", "ON_ERROR_STOP=1", "-c", sql];
    return check([this.bin, ...args], { ...this.options(), env: { ...this.options().env, PGTZ: "UTC" } });
  }

  options() {
    return { cwd: this.project, env: { ...process.env, DATABASE_URL: this.url }, encoding: "utf8", maxBuffer: 1 << 28 };
  }
}

function toml(text) {
  return JSON.stringify(String(text)).replaceAll("\x7f", "\\u007F");
}

function almanacBin() {
  if (process.env.ALMANAC) return process.env.ALMANAC;
  const checkout = resolve(here, "../../target/release/almanac");
  return existsSync(checkout) ? checkout : "almanac";
}

function check([command, ...args], options) {
  try {
    return execFileSync(command, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], maxBuffer: 1 << 28, ...options });
  } catch (e) {
    throw new Error(`${[command, ...args].join(" ")} failed:\n${e.stdout ?? ""}${e.stderr ?? e.message}`);
  }
}
