#!/usr/bin/env bash
# The benchmark: builds the plugins and the host, then `almanac bench` on its own private
# PostgreSQL (fsync on) under .almanac/bench. Extra arguments go to `almanac bench`
# (e.g. --json, --batches 1,32, --accounts 50000).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --need-server
plugins_out=$(bash scripts/build-plugins.sh)
cargo build --quiet --release -p almanac
exec target/release/almanac bench --plugin "$plugins_out/daily_points.wasm" --contention "$plugins_out/fixture_crosslock.wasm" "$@"
