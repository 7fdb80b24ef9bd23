#!/usr/bin/env bash
# Command 2: the whole test suite. Unit tests, the guest SDK's doc example, and the
# end-to-end tests, which start their own PostgreSQL and build the plugins once.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --need-server --need-browser --need-pgbouncer --need-node --need-python
bash scripts/build-plugins.sh >/dev/null
cargo test --release --workspace "$@"
