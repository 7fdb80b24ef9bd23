#!/usr/bin/env bash
# Builds every plugin in plugins/ for wasm32-wasip2 into target/wasm (its own target
# dir, so it can run while another cargo holds the host's build lock), installing the
# target on a fresh machine first.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    echo "installing the wasm32-wasip2 target (once per machine)" >&2
    rustup target add wasm32-wasip2 >&2
fi
packages=()
for manifest in plugins/*/Cargo.toml plugins/fixtures/*/Cargo.toml; do
    packages+=(-p "$(sed -n 's/^name = "\(.*\)"/\1/p' "$manifest" | head -n1)")
done
# Guests ship without debug info: it is most of their size.
CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=true \
    cargo build --quiet --release --target wasm32-wasip2 --target-dir target/wasm "${packages[@]}"
echo "$(pwd)/target/wasm/wasm32-wasip2/release"
