#!/usr/bin/env bash
# The book: docs/ built by mdBook into target/book (open target/book/index.html).
# The test command runs this too, so a page mdBook cannot build fails the suite; the
# links are checked by host/tests/docs.rs, the CLI reference by the CLI's own test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --need-book
target/tools/bin/mdbook build docs >&2
echo "the book: $(pwd)/target/book/index.html"
