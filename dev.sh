#!/usr/bin/env bash
# Set-up and everyday commands on a fresh machine: `./dev.sh demo`, `./dev.sh test`.
# Creates .venv on first use (and again whenever pyproject.toml changes), then runs the command.
set -euo pipefail
cd "$(dirname "$0")"

PY=${PYTHON:-python3}
venv=.venv

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

check_python() {
    # lockguard needs Python 3.11+: say so before pip fails deep in a dependency.
    local version
    version=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || {
        echo "dev.sh: $PY does not run; lockguard needs Python 3.11 or newer (set PYTHON=python3.11)" >&2
        exit 2
    }
    case "$version" in
        3.1[1-9]|3.[2-9][0-9]|[4-9].*) ;;
        *)
            echo "dev.sh: $PY is Python $version; lockguard needs Python 3.11 or newer." >&2
            echo "        Install one and run, e.g.: PYTHON=python3.11 ./dev.sh ${cmd:-demo}" >&2
            exit 2
            ;;
    esac
}

venv_ok() {
    # A venv made by an older Python, or half-made by a failed install, is rebuilt, not reused.
    [ -x "$venv/bin/python" ] &&
        "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null
}

ensure_venv() {
    # $1: the extra to install: `demo` (the demo and the CLI: no lint or test tools) or `test`
    # (everything). The test extra has all the demo's, so its stamp serves both.
    local extra=${1:-test} hash
    hash=$(sha256sum pyproject.toml | cut -c1-16)
    if [ -f "$venv/.installed-test-$hash" ] || [ -f "$venv/.installed-$extra-$hash" ]; then
        return
    fi
    check_python
    if [ -e "$venv" ] && ! venv_ok; then
        echo "dev.sh: $venv is broken or from a Python older than 3.11: rebuilding it" >&2
        rm -rf "$venv"
    fi
    echo "dev.sh: installing lockguard and its '$extra' extra into $venv (once)" >&2
    "$PY" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -e ".[$extra]"
    rm -f "$venv"/.installed-*
    touch "$venv/.installed-$extra-$hash"
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
        ensure_venv demo
        exec "$venv/bin/lockguard" demo "$@"
        ;;
    bench)
        ensure_redis_server
        ensure_venv
        exec "$venv/bin/python" bench/scan_bench.py "$@"
        ;;
    lockguard)
        ensure_venv demo
        exec "$venv/bin/lockguard" "$@"
        ;;
    *)
        echo "usage: ./dev.sh demo|test|lint|bench|lockguard [args...]" >&2
        exit 2
        ;;
esac
