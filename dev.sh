#!/usr/bin/env bash
# Set-up and everyday commands on a fresh machine: `./dev.sh demo`, `./dev.sh test`.
# Creates .venv on first use (and again whenever pyproject.toml changes), then runs the command.
set -euo pipefail
cd "$(dirname "$0")"

PY=${PYTHON:-python3}
venv=.venv
stamp="$venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"

ensure_redis_server() {
    # The tests start their own redis-server; the demo uses one when installed (fakeredis
    # otherwise). Install it with the system package manager when it is missing and we may.
    if ! command -v redis-server >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "dev.sh: installing redis-server (apt-get)" >&2
            apt-get update -qq >/dev/null
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
        else
            echo "dev.sh: redis-server not found; install it (e.g. apt-get install redis-server)" >&2
        fi
    fi
}

ensure_promtool() {
    # tests/deploy check the alert rules with Prometheus's own promtool (Debian: `prometheus`;
    # without recommends, only the binaries: nothing is started).
    if ! command -v promtool >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "dev.sh: installing promtool (apt-get install prometheus)" >&2
            apt-get update -qq >/dev/null
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                prometheus >/dev/null
        else
            echo "dev.sh: promtool not found; install it (e.g. apt-get install prometheus)" >&2
        fi
    fi
}

ensure_venv() {
    if [ ! -f "$stamp" ]; then
        "$PY" -m venv "$venv"
        "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
        "$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[test]'
        rm -f "$venv"/.installed-*
        touch "$stamp"
    fi
}

cmd=${1:-help}
shift || true
case "$cmd" in
    test)
        ensure_redis_server
        ensure_promtool
        ensure_venv
        exec "$venv/bin/python" -m pytest -q -n auto "$@"
        ;;
    lint)
        ensure_venv
        "$venv/bin/ruff" check bot tests bench
        "$venv/bin/ruff" format --check bot tests bench
        "$venv/bin/mypy"
        # the layers of bot/ and no import circle (pyproject.toml [tool.importlinter])
        exec "$venv/bin/lint-imports" --no-cache
        ;;
    demo)
        ensure_venv
        exec "$venv/bin/lockguard" demo "$@"
        ;;
    bench)
        ensure_redis_server
        ensure_venv
        exec "$venv/bin/python" bench/scan_bench.py "$@"
        ;;
    lockguard)
        ensure_venv
        exec "$venv/bin/lockguard" "$@"
        ;;
    *)
        echo "usage: ./dev.sh demo|test|lint|bench|lockguard [args...]" >&2
        exit 2
        ;;
esac
