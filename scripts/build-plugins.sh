#!/usr/bin/env bash
# Builds every plugin in plugins/ for wasm32-wasip2 into target/wasm (its own target
# dir, so it can run while another cargo holds the host's build lock), installing the
# target on a fresh machine first. Python plugins (plugins/*-py, each an app.py) are
# built with componentize-py from .venv (scripts/bootstrap.sh --need-python installs it;
# without it they are skipped, with a line saying so),
# only when their sources, the Python SDK or the WIT changed; TypeScript plugins
# (plugins/*-ts) likewise with guest-sdk/typescript (scripts/bootstrap.sh --need-typescript). With package names as
# arguments (`build-plugins.sh daily-points`), only those Rust plugins are built.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    echo "installing the wasm32-wasip2 target (once per machine)" >&2
    rustup target add wasm32-wasip2 >&2
fi
packages=()
for name in "$@"; do packages+=(-p "$name"); done
if [ $# -eq 0 ]; then
    for manifest in plugins/*/Cargo.toml plugins/fixtures/*/Cargo.toml; do
        [ -e "$manifest" ] || continue
        packages+=(-p "$(sed -n 's/^name = "\(.*\)"/\1/p' "$manifest" | head -n1)")
    done
fi
# Guests ship without debug info: it is most of their size.
CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=true \
    cargo build --quiet --release --target wasm32-wasip2 --target-dir target/wasm "${packages[@]}"
out="$(pwd)/target/wasm/wasm32-wasip2/release"
apps=(plugins/*-py/app.py plugins/fixtures/*-py/app.py)
[ $# -eq 0 ] || apps=()
for app in "${apps[@]}"; do
    [ -e "$app" ] || continue
    dir="$(dirname "$app")"
    wasm="$out/$(basename "$dir" | tr - _).wasm"
    if [ -e "$wasm" ] && [ -z "$(find "$dir" guest-sdk/python wit -name tests -prune -o \( -name '*.py' -o -name '*.wit' \) -newer "$wasm" -print)" ]; then
        continue
    fi
    if [ ! -x .venv/bin/componentize-py ]; then
        echo "build-plugins: skipping $dir: componentize-py is not installed (scripts/bootstrap.sh --need-python)" >&2
        continue
    fi
    echo "build-plugins: componentize-py $dir (about 30 s)" >&2
    .venv/bin/componentize-py -d wit -w task-plugin componentize -p "$dir" -p guest-sdk/python app -o "$wasm" >/dev/null
done
# TypeScript plugins (plugins/*-ts, plugins/fixtures/*-ts: each a src/plugin.ts), built
# with the SDK's own wrapper (esbuild, then componentize-js without wasi:http).
entries=(plugins/*-ts/src/plugin.ts plugins/fixtures/*-ts/src/plugin.ts)
[ $# -eq 0 ] || entries=()
for entry in "${entries[@]}"; do
    [ -e "$entry" ] || continue
    dir="$(dirname "$(dirname "$entry")")"
    wasm="$out/$(basename "$dir" | tr - _).wasm"
    if [ -e "$wasm" ] && [ -z "$(find "$dir/src" guest-sdk/typescript/src guest-sdk/typescript/build.mjs wit \( -name '*.ts' -o -name '*.mjs' -o -name '*.wit' \) -newer "$wasm" -print)" ]; then
        continue
    fi
    if [ ! -x guest-sdk/typescript/node_modules/.bin/componentize-js ]; then
        echo "build-plugins: skipping $dir: the TypeScript build is not installed (scripts/bootstrap.sh --need-typescript)" >&2
        continue
    fi
    echo "build-plugins: componentize-js $dir (about 20 s)" >&2
    node guest-sdk/typescript/build.mjs "$entry" -o "$wasm" --check
done
echo "$out"
