#!/usr/bin/env bash
# Command 1: the demo on a fresh machine. Builds the daily-points plugin and the host,
# starts a private PostgreSQL under .almanac/ when DATABASE_URL is unset, runs the seed's
# scenario (1,000 accounts, a three-day outage) until drained, prints the result. Each
# step says what it does and how long it usually takes, and cargo shows its progress.
set -euo pipefail
cd "$(dirname "$0")/.."
began=$SECONDS
step() { echo "== $* ($((SECONDS - began)) s so far)" >&2; }
step "checking the machine: the wasm32-wasip2 target, libclang, PostgreSQL (installed if missing)"
bash scripts/bootstrap.sh
step "building the daily-points plugin for wasm32-wasip2 (the first time: about a minute)"
plugins_out=$(bash scripts/build-plugins.sh daily-points)
mkdir -p .almanac/plugins
cp "$plugins_out/daily_points.wasm" .almanac/plugins/
step "building the almanac host (the first time on a machine: about 7 minutes on 2 cores, most of it wasmtime's code generator and PostgreSQL's parser; then seconds)"
cargo build --release -p almanac
step "built; running the demo"
exec target/release/almanac demo --plugins .almanac/plugins "$@"
