"""A big case at the CLI, as a user runs it (real redis-server): `lockguard approve` of a case of
more than LOCKGUARD_CONFIRM_TYPED_ABOVE locks asks for their number on a terminal (a real pty),
takes `--yes-count N` from a script, and without either refuses with exit 2 saying how, having
released nothing; on a terminal a progress bar shows the release. `lockguard cases CASE` lists
every lock of a case, `--json` as JSON Lines.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time

import pytest
import redis

from bot.store.keyspace import case_key
from tests.conftest import RedisServer
from tests.core.test_layouts import uuid1_hex
from tests.test_cli_cases import point_at, run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ABOVE = 10


@pytest.fixture
def env(
    monkeypatch: pytest.MonkeyPatch, redis_server: RedisServer, real_redis: redis.Redis
) -> redis.Redis:
    point_at(monkeypatch, redis_server)
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
    monkeypatch.setenv("LOCKGUARD_CONFIRM_TYPED_ABOVE", str(ABOVE))
    return real_redis


def big_case(r: redis.Redis, n: int) -> tuple[str, list[bytes]]:
    """`n` abandoned redis-py locks and the case `lockguard scan` opens for them."""
    now_ms = int(r.time()[0]) * 1000
    keys = [f"lock:big:{i:05d}".encode() for i in range(n)]
    with r.pipeline(transaction=False) as pipe:
        for i, key in enumerate(keys):
            pipe.set(key, uuid1_hex(now_ms - 7_200_000 - i))
        pipe.execute()
    code, text = run("scan", "--json")
    assert code == 1
    case = json.loads(text)["case"]
    assert case["lock_count"] == n
    return str(case["case_id"]), keys


def test_without_a_terminal_or_yes_count_a_big_case_is_refused_saying_how(
    env: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    case_id, keys = big_case(env, 30)
    capsys.readouterr()
    code, _ = run("approve", case_id, "--by", "ann")
    assert code == 2
    err = capsys.readouterr().err
    assert f"case {case_id} holds 30 locks, more than LOCKGUARD_CONFIRM_TYPED_ABOVE (10)" in err
    assert "--yes-count 30" in err
    assert "nothing was approved" in err
    assert env.exists(*keys) == 30
    assert env.hget(case_key(case_id), "state") == b"pending"


def test_yes_count_must_be_the_cases_number_of_locks(
    env: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    case_id, keys = big_case(env, 30)
    for wrong in ("29", "31"):
        code, _ = run("approve", case_id, "--by", "ann", "--yes-count", wrong)
        assert code == 2
        assert f"--yes-count {wrong} is not the number of locks of case {case_id} (30)" in (
            capsys.readouterr().err
        )
    assert env.exists(*keys) == 30
    code, text = run("approve", case_id, "--by", "ann", "--yes-count", "30")
    assert code == 0, capsys.readouterr().err
    assert "30 of 30 lock(s) released" in text
    assert env.exists(*keys) == 0


def test_a_case_at_the_threshold_needs_no_count(env: redis.Redis) -> None:
    case_id, keys = big_case(env, ABOVE)
    code, text = run("approve", case_id, "--by", "ann")
    assert code == 0
    assert f"{ABOVE} of {ABOVE} lock(s) released" in text
    assert env.exists(*keys) == 0


def on_a_terminal(args: list[str], typed: str, timeout: float = 60) -> tuple[int, str]:
    """`lockguard ARGS` with its stdin, stdout and stderr on a pty (a terminal), `typed` sent
    once it asks; its exit code and all it wrote."""
    main, side = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", *args],
        stdin=side,
        stdout=side,
        stderr=side,
        cwd=os.path.dirname(__file__),
        env={"COLUMNS": "120", **os.environ, "TERM": "xterm"},
    )
    os.close(side)
    seen = b""
    sent = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed the terminal: it has exited
                break
            if not chunk:
                break
            seen += chunk
        if not sent and b"to approve case" in seen:
            os.write(main, typed.encode() + b"\n")
            sent = True
        if proc.poll() is not None and not ready:
            break
    os.close(main)
    code = proc.wait(timeout=10)
    return code, seen.decode("utf-8", "replace")


def test_on_a_terminal_the_typed_count_is_asked_and_a_bar_shows_the_release(
    env: redis.Redis,
) -> None:
    case_id, keys = big_case(env, 300)
    code, text = on_a_terminal(["approve", case_id, "--by", "ann"], typed="299")
    assert code == 2, text
    assert f"Type 300 to approve case {case_id}" in text
    assert "'299' is not 300: nothing was approved" in text
    assert env.exists(*keys) == 300

    code, text = on_a_terminal(["approve", case_id, "--by", "ann"], typed="300")
    assert code == 0, text
    assert "300/300" in text  # the bar, at its end
    assert "releasing" in text
    assert "300 of 300 lock(s) released" in text
    assert env.exists(*keys) == 0


def test_cases_case_lists_every_lock_and_json_streams_them(env: redis.Redis) -> None:
    case_id, keys = big_case(env, 3_000)
    code, text = run("cases", case_id)
    assert code == 0
    lines = text.splitlines()
    assert lines[0].startswith(f"case {case_id}: pending, 3000 lock(s)")
    rows = [ln for ln in lines if ln.strip().split(" ", 1)[0].isdigit()]
    assert [int(ln.split()[0]) for ln in rows] == list(range(1, 3_001))
    assert sorted(ln.split()[5].encode() for ln in rows) == keys  # n verdict held ttl layout key
    assert "more lock(s)" not in text

    code, text = run("cases", case_id, "--json")
    assert code == 0
    head, *locks = (json.loads(ln) for ln in text.splitlines())
    assert head["case"]["case_id"] == case_id
    assert head["case"]["lock_count"] == 3_000
    assert "locks" not in head["case"]
    assert [lk["n"] for lk in locks] == list(range(1, 3_001))
    assert sorted(bytes.fromhex(lk["key_hex"]) for lk in locks) == keys
    assert {lk["reason"] for lk in locks} == {"infinite_ttl"}


def test_cases_of_an_unknown_or_malformed_case_is_exit_2(
    env: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("cases", "LG-200101-abcdef")[0] == 2
    assert "no case LG-200101-abcdef" in capsys.readouterr().err
    assert run("cases", "../../etc")[0] == 2
