#!/usr/bin/env node
// Build a TypeScript (or JavaScript) Almanac plugin into a component:
//
//   node guest-sdk/typescript/build.mjs src/plugin.ts -o plugin.wasm [--wit DIR] [--check]
//
// esbuild strips the types and bundles the plugin with the SDK (`almanac-guest`) into one
// ES module; componentize-js (SpiderMonkey, snapshotted with wizer) makes it a component of
// world `task-plugin`. Its `http` and `fetch-event` features are off: they would import
// wasi:http, which the host never links, so the component would be refused. `--aot` (weval)
// is not used: it downloads from outside the npm registry. With --check, tsc checks the
// plugin's and the SDK's types first (strict).
import { build } from "esbuild";
import { componentize } from "@bytecodealliance/componentize-js";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const usage = "usage: build.mjs ENTRY.ts -o OUT.wasm [--wit DIR] [--check]";
let entry, out, check = false;
let wit = resolve(here, "../../wit");
for (let i = 0; i < args.length; i++) {
  if (args[i] === "-o") out = args[++i];
  else if (args[i] === "--wit") wit = args[++i];
  else if (args[i] === "--check") check = true;
  else if (!entry && !args[i].startsWith("-")) entry = args[i];
  else fail(`unknown argument ${args[i]}\n${usage}`);
}
if (!entry || !out) fail(usage);

if (check) {
  // The plugin and the SDK under `strict`, `almanac-guest` mapped to the SDK's source.
  const dir = mkdtempSync(join(tmpdir(), "almanac-tsc-"));
  const tsconfig = join(dir, "tsconfig.json");
  writeFileSync(tsconfig, JSON.stringify({
    compilerOptions: { strict: true, target: "es2022", module: "es2022", moduleResolution: "bundler", noEmit: true, types: [],
      paths: { "almanac-guest": [join(here, "src/index.ts")] } },
    files: [join(here, "src/wit.d.ts"), resolve(entry)],
  }));
  try {
    execFileSync(process.execPath, [join(here, "node_modules/typescript/bin/tsc"), "-p", tsconfig], { stdio: "inherit" });
  } catch {
    fail(`${entry}: type errors (above)`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const dir = mkdtempSync(join(tmpdir(), "almanac-ts-"));
try {
  const bundle = join(dir, "plugin.js");
  await build({
    entryPoints: [entry],
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    outfile: bundle,
    alias: { "almanac-guest": join(here, "src/index.ts") },
    external: ["almanac:plugin/*"],
    logLevel: "warning",
  });
  const { component } = await componentize({
    sourcePath: bundle,
    witPath: wit,
    worldName: "task-plugin",
    disableFeatures: ["http", "fetch-event"],
  });
  writeFileSync(out, component);
} catch (e) {
  fail(`building ${entry}: ${e?.message ?? e}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

function fail(message) {
  console.error(`almanac-build-ts: ${message}`);
  process.exit(1);
}
