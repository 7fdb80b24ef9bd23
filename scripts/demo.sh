#!/usr/bin/env bash
# Command 1: the demo on a fresh machine. Builds the plugins and the host, starts a
# private PostgreSQL under .almanac/ when DATABASE_URL is unset, runs the seed's
# scenario (1,000 accounts, a three-day outage) until drained, prints the result.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
plugins_out=$(bash scripts/build-plugins.sh)
mkdir -p .almanac/plugins
cp "$plugins_out/daily_points.wasm" .almanac/plugins/
cargo build --quiet --release -p almanac
exec target/release/almanac demo --plugins .almanac/plugins "$@"
