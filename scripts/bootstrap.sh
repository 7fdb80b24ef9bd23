#!/usr/bin/env bash
# Installs what a fresh machine lacks: the wasm32-wasip2 target, libclang (the pg_query
# crate generates its libpg_query bindings with bindgen at build time) and the PostgreSQL
# server binaries (only when no DATABASE_URL is given and none are installed); with
# --need-browser, Debian's chromium and chromium-driver for the console's browser tests; with
# --need-pgbouncer, Debian's pgbouncer for the connection-pooler test; with --need-node,
# Node.js (Debian's nodejs and npm) and the `pg` package for the book's Node example (docs/src/guide/enqueue.md);
# with --need-typescript, Node.js too and guest-sdk/typescript's npm packages (esbuild, componentize-js) for TypeScript plugins;
# with --need-python, a virtualenv .venv with componentize-py and pytest (PyPI) for Python plugins,
# psycopg for the book's Python enqueue example, numpy and python-dateutil for the calendar oracle;
# with --need-failover, Debian's pg_auto_failover (postgresql-15-auto-failover) for the failover test;
# with --need-lint, rustup's rustfmt and clippy components;
# with --need-book, mdBook (crates.io, built by cargo into target/tools) for the book in docs/.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo_cmd=""
[ "$(id -u)" = 0 ] || sudo_cmd="sudo"
apt_install() {
    # The package lists may be missing or stale on a fresh machine: refresh once on failure.
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "$@" >&2 \
        || { $sudo_cmd apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "$@" >&2; }
}
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    echo "bootstrap: installing the wasm32-wasip2 target" >&2
    rustup target add wasm32-wasip2 >&2
fi
if [ -z "${LIBCLANG_PATH:-}" ] && ! ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/llvm-*/lib/libclang-[0-9]*.so* /usr/lib/*-linux-gnu/libclang-[0-9]*.so* >/dev/null 2>&1; then
    echo "bootstrap: installing libclang (Debian package libclang-dev), which building pg_query needs" >&2
    apt_install libclang-dev
fi
have_server() {
    [ -n "${ALMANAC_PG_BIN:-}" ] && [ -x "$ALMANAC_PG_BIN/initdb" ] && return 0
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && return 0
    command -v initdb >/dev/null 2>&1
}
need_server=false need_browser=false need_pgbouncer=false need_node=false need_typescript=false need_python=false need_failover=false need_book=false need_lint=false
for arg in "$@"; do
    case "$arg" in
        --need-server) need_server=true ;;
        --need-browser) need_browser=true ;;
        --need-pgbouncer) need_pgbouncer=true ;;
        --need-node) need_node=true ;;
        --need-typescript) need_node=true need_typescript=true ;;
        --need-python) need_python=true ;;
        --need-failover) need_failover=true ;;
        --need-book) need_book=true ;;
        --need-lint) need_lint=true ;;
    esac
done
if [ -z "${DATABASE_URL:-}" ] || $need_server; then
    if ! have_server; then
        echo "bootstrap: installing PostgreSQL server binaries (Debian package postgresql)" >&2
        apt_install postgresql
    fi
fi
if $need_browser && ! command -v chromium >/dev/null 2>&1; then
    echo "bootstrap: installing Chromium (Debian package chromium), which the console's browser tests drive" >&2
    apt_install chromium
fi
if $need_browser && ! command -v chromedriver >/dev/null 2>&1; then
    echo "bootstrap: installing ChromeDriver (Debian package chromium-driver): the console's tests click through WebDriver" >&2
    apt_install chromium-driver
fi
if $need_pgbouncer && ! [ -x /usr/sbin/pgbouncer ] && ! command -v pgbouncer >/dev/null 2>&1; then
    echo "bootstrap: installing PgBouncer (Debian package pgbouncer), which the connection-pooler test runs" >&2
    apt_install pgbouncer
fi
if $need_lint && ! { cargo fmt --version && cargo clippy --version; } >/dev/null 2>&1; then
    echo "bootstrap: installing rustup's rustfmt and clippy components" >&2
    rustup component add rustfmt clippy >&2
fi
# mdBook 0.4 without its server and file watcher (what `mdbook build` needs, half the
# crates); kept under target/tools so a clean of the build does not lose it silently.
if $need_book && ! [ -x target/tools/bin/mdbook ]; then
    echo "bootstrap: building mdBook 0.4 from crates.io into target/tools (about two minutes, once)" >&2
    cargo install --quiet --locked --no-default-features --version '~0.4' --root target/tools mdbook >&2
fi
if $need_failover && ! { command -v pg_autoctl && ls /usr/lib/postgresql/*/lib/pgautofailover.so; } >/dev/null 2>&1; then
    echo "bootstrap: installing pg_auto_failover (Debian package postgresql-15-auto-failover), which the failover test runs" >&2
    apt_install postgresql-15-auto-failover
fi
if $need_node; then
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        echo "bootstrap: installing Node.js (Debian packages nodejs, npm) for the book's Node example (docs/src/guide/enqueue.md)" >&2
        apt_install nodejs npm
    fi
    if [ ! -d examples/enqueue/node_modules/pg ]; then
        echo "bootstrap: installing the example's npm packages (pg, from package-lock.json)" >&2
        npm ci --prefix examples/enqueue --no-audit --no-fund --silent >&2
    fi
fi
if $need_typescript && [ ! -x guest-sdk/typescript/node_modules/.bin/componentize-js ]; then
    echo "bootstrap: installing the TypeScript plugin build (esbuild, componentize-js, typescript; npm, from guest-sdk/typescript/package-lock.json, about 400 MB)" >&2
    npm ci --prefix guest-sdk/typescript --no-audit --no-fund --silent >&2
fi
if $need_python && ! { [ -x .venv/bin/componentize-py ] && [ -x .venv/bin/pytest ] && .venv/bin/python -c 'import psycopg, numpy, dateutil' 2>/dev/null; }; then
    if ! python3 -m venv --help >/dev/null 2>&1; then
        echo "bootstrap: installing python3-venv (Debian) for Python plugins" >&2
        apt_install python3-venv python3-pip
    fi
    echo "bootstrap: installing componentize-py, pytest, psycopg, numpy and python-dateutil into .venv (PyPI; they build and test Python plugins, run the enqueue example, and are the business-calendar oracle)" >&2
    [ -x .venv/bin/pip ] || python3 -m venv .venv >&2
    .venv/bin/pip install --quiet --disable-pip-version-check componentize-py==0.25.1 pytest==8.3.4 'psycopg[binary]==3.2.3' numpy==2.2.6 python-dateutil==2.9.0.post0 >&2
fi
