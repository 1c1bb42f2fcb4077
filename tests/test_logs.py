"""Structured logs: one line per scan, case opened, decision, release outcome and error, on
stderr, in text or JSON, with keys escaped and no secret anywhere."""

from __future__ import annotations

import io
import json
import logging
import os

import pytest
import redis

from bot import cli, logs
from tests.conftest import RedisServer
from tests.test_layouts import uuid1_hex


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, auth_redis_server: RedisServer,
        auth_redis_password: str) -> redis.Redis:
    monkeypatch.setenv("REDIS_URL", f"redis://:{auth_redis_password}@127.0.0.1:"
                                    f"{auth_redis_server.port}/0")
    monkeypatch.setenv("LOCKGUARD_LOG_LEVEL", "info")
    monkeypatch.setenv("LOCKGUARD_LOG_FORMAT", "json")
    monkeypatch.chdir(os.path.dirname(__file__))  # no stray .env
    client = auth_redis_server.client(password=auth_redis_password)
    client.flushall()
    yield client
    client.flushall()
    logging.getLogger(logs.ROOT).handlers.clear()


def run(*argv: str) -> int:
    return cli.main(list(argv), out=io.StringIO())


def events(err: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in err.splitlines() if line.strip()]


def test_scan_and_approve_log_one_json_line_per_step_without_secrets(
        env: redis.Redis, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        auth_redis_password: str) -> None:
    old = uuid1_hex(int(env.time()[0]) * 1000 - 7_200_000)
    env.set(b"lock:<!channel>\xff", old)
    env.set(b"lock:b", old[:-1] + b"0")
    assert run("scan") == 1
    got = events(capsys.readouterr().err)
    assert [e["event"] for e in got] == ["scan_completed", "case_opened"]
    scan = got[0]
    assert scan["scanned"] == 2
    assert scan["findings"] == 2
    assert scan["trigger"] == "cli"
    assert scan["level"] == "info"
    assert scan["logger"] == "lockguard.scan"
    assert str(scan["redis"]).endswith(f":{env.connection_pool.connection_kwargs['port']}/0")
    case_id = str(got[1]["case_id"])
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
    assert run("approve", case_id, "--by", "ann") == 0
    err = capsys.readouterr().err
    got = events(err)
    assert [e["event"] for e in got] == ["decision", "release", "release", "case_closed"]
    keys = {e["key"] for e in got if e["event"] == "release"}
    assert keys == {"lock:<!channel>\\xff", "lock:b"}  # binary bytes escaped, as everywhere
    assert {e["outcome"] for e in got if e["event"] == "release"} == {"released"}
    assert got[-1]["outcomes"] == {"released": 2}
    assert auth_redis_password not in err
    assert old.decode() not in err  # tokens are never logged


def test_text_format_and_the_quiet_default(env: redis.Redis, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    env.set(b"lock:a", b"tok", px=60_000)
    monkeypatch.setenv("LOCKGUARD_LOG_FORMAT", "TEXT")
    assert run("scan") == 0
    (line,) = capsys.readouterr().err.splitlines()
    assert " info scan_completed trigger=cli " in line
    assert " scanned=1 " in line
    monkeypatch.delenv("LOCKGUARD_LOG_LEVEL")
    assert run("scan") == 0
    assert capsys.readouterr().err == ""  # a healthy CLI run says nothing on stderr


@pytest.mark.parametrize(("name", "value"), [("LOCKGUARD_LOG_LEVEL", "loud"),
                                             ("LOCKGUARD_LOG_FORMAT", "xml")])
def test_bad_log_settings_are_named(env: redis.Redis, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str], name: str,
                                    value: str) -> None:
    monkeypatch.setenv(name, value)
    assert run("scan") == 2
    assert name in capsys.readouterr().err


def test_secrets_are_scrubbed_from_any_line() -> None:
    stream = io.StringIO()
    logs.configure("info", "text", secrets=("s3cr3t-value",), stream=stream)
    try:
        logs.event(logs.logger("t"), "oops", detail="url redis://:s3cr3t-value@h")
        logs.configure("info", "text", stream=stream)  # again: replaced, not doubled
        logs.event(logs.logger("t"), "second")
    finally:
        logging.getLogger(logs.ROOT).handlers.clear()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert "s3cr3t" not in lines[0]
    assert "***" in lines[0]
