#!/usr/bin/env bash
# Installs what a fresh machine lacks: the wasm32-wasip2 target and the PostgreSQL
# server binaries (only when no DATABASE_URL is given and none are installed).
set -euo pipefail
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    echo "bootstrap: installing the wasm32-wasip2 target" >&2
    rustup target add wasm32-wasip2 >&2
fi
have_server() {
    [ -n "${ALMANAC_PG_BIN:-}" ] && [ -x "$ALMANAC_PG_BIN/initdb" ] && return 0
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && return 0
    command -v initdb >/dev/null 2>&1
}
if [ -z "${DATABASE_URL:-}" ] || [ "${1:-}" = "--need-server" ]; then
    if ! have_server; then
        echo "bootstrap: installing PostgreSQL server binaries (Debian package postgresql)" >&2
        sudo_cmd=""
        [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
        $sudo_cmd apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq postgresql >&2
    fi
fi
