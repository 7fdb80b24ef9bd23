#!/usr/bin/env bash
# Command 2: the whole test suite. Formatting and lints, the book, unit tests, the guest SDK's doc example, and the
# end-to-end tests, which start their own PostgreSQL and build the plugins once.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --need-server --need-browser --need-pgbouncer --need-node --need-typescript --need-python --need-failover --need-book --need-lint
bash scripts/build-plugins.sh >/dev/null
bash scripts/book.sh >/dev/null
# The house style: rustfmt.toml's layout, and no clippy warning in any target.
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets --quiet -- -D warnings
# plugins/daily-points' own test (almanac-testing) starts a private cluster there.
trap 'target/release/almanac --data-dir plugins/daily-points/.almanac stop >/dev/null 2>&1 || true' EXIT
cargo test --release --workspace "$@"
