"""`lockguard scan` as scripts and operators use it: exit codes, the JSON contract, bad
configuration touching nothing, and Redis failures as one line that never shows the password."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
import redis

from bot.cli import main
from bot.store import keyspace


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """A clean working directory (no stray .env) and nothing but what a test sets."""
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def point_at(env: pytest.MonkeyPatch, client: redis.Redis) -> None:
    env.setenv("REDIS_HOST", "127.0.0.1")
    env.setenv("REDIS_PORT", str(client.connection_pool.connection_kwargs["port"]))


def run(*argv: str) -> tuple[int, str]:
    out = StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_empty_keyspace_exits_0(env: pytest.MonkeyPatch, real_redis: redis.Redis) -> None:
    point_at(env, real_redis)
    code, out = run("scan")
    assert code == 0
    assert "no locks found" in out


def test_healthy_locks_exit_0(env: pytest.MonkeyPatch, real_redis: redis.Redis) -> None:
    point_at(env, real_redis)
    real_redis.set(b"lock:a", b"tok", px=600_000)
    real_redis.set(b"not-a-lock", b"x")
    code, out = run("scan")
    assert code == 0
    assert "healthy" in out
    assert "lock:a" in out
    assert "not-a-lock" not in out


def test_healthy_locks_exit_0_in_json(env: pytest.MonkeyPatch, real_redis: redis.Redis) -> None:
    point_at(env, real_redis)
    real_redis.set(b"lock:a", b"tok", px=600_000)
    code, out = run("scan", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["scanned"] == 1
    assert doc["findings"] == []


def test_findings_exit_1_with_a_table(env: pytest.MonkeyPatch, real_redis: redis.Redis) -> None:
    point_at(env, real_redis)
    real_redis.set(b"lock:forever", b"tok")
    code, out = run("scan")
    assert code == 1
    assert "infinite_ttl" in out
    assert "lock:forever" in out


def test_json_output_has_the_documented_shape(
    env: pytest.MonkeyPatch, real_redis: redis.Redis
) -> None:
    point_at(env, real_redis)
    env.setenv("LOCKGUARD_LOCK_PATTERNS", "lock:*,\\x17*")
    binary_key = b"\x17\x00\x00\x00\x00\x00\x00\x00\x07"
    real_redis.set(b"lock:forever", b"tok-1")
    real_redis.set(b"lock:<!channel>", b"<!here>tok")
    real_redis.set(binary_key, b"tok-\x7e")
    code, out = run("scan", "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["scanned"] == 3
    assert isinstance(doc["findings"], list)
    assert len(doc["findings"]) == 3
    by_hex = {f["key_hex"]: f for f in doc["findings"]}
    for f in doc["findings"]:
        assert {"key", "key_hex", "type", "reason", "ttl_ms", "held_seconds", "identity"} <= set(f)
        assert f["reason"] == "infinite_ttl"
        assert f["type"] == "string"
        assert f["ttl_ms"] == -1
        assert isinstance(f["held_seconds"], int | float)
    assert by_hex[b"lock:forever".hex()]["key"] == "lock:forever"
    assert by_hex[b"lock:forever".hex()]["identity"] == "tok-1"
    assert by_hex[b"lock:<!channel>".hex()]["key"] == "lock:<!channel>"
    assert by_hex[b"lock:<!channel>".hex()]["identity"] == "<!here>tok"
    stalwart = by_hex[binary_key.hex()]
    assert stalwart["key"] == "\\x17\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x07"
    assert stalwart["layout"] == "string"


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"LOCKGUARD_STALE_THRESHOLD_SECONDS": "5"}, ["LOCKGUARD_STALE_THRESHOLD_SECONDS"]),
        ({"LOCKGUARD_LOCK_PATTERNS": "*"}, ["LOCKGUARD_LOCK_PATTERNS"]),
        ({"LOCKGUARD_LOCK_PATTERNS": "lockguard:*"}, ["LOCKGUARD_LOCK_PATTERNS"]),
        (
            {"LOCKGUARD_FLAG_INFINITE_TTL": "sometimes", "LOCKGUARD_SCAN_COUNT": "0"},
            ["LOCKGUARD_FLAG_INFINITE_TTL", "LOCKGUARD_SCAN_COUNT"],
        ),
    ],
)
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_bad_configuration_exits_2_and_touches_nothing(
    env: pytest.MonkeyPatch,
    real_redis: redis.Redis,
    capsys: pytest.CaptureFixture[str],
    bad: dict[str, str],
    named: list[str],
    json_flag: list[str],
) -> None:
    point_at(env, real_redis)
    real_redis.set(b"lock:forever", b"tok")
    for k, v in bad.items():
        env.setenv(k, v)
    size = real_redis.dbsize()
    connections = real_redis.info("stats")["total_connections_received"]
    code, out = run("scan", *json_flag)
    assert code == 2
    assert out == ""
    err = capsys.readouterr().err
    for name in named:
        assert name in err
    assert real_redis.dbsize() == size
    assert list(real_redis.scan_iter(match=keyspace.PREFIX + b"*")) == []
    assert list(real_redis.scan_iter(match=keyspace.LEGACY_PREFIX + b"*")) == []
    # Not even a connection was made.
    assert real_redis.info("stats")["total_connections_received"] == connections


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_redis_down_exits_3_with_one_line_naming_the_endpoint(
    env: pytest.MonkeyPatch,
    closed_port: int,
    capsys: pytest.CaptureFixture[str],
    json_flag: list[str],
) -> None:
    env.setenv("REDIS_HOST", "127.0.0.1")
    env.setenv("REDIS_PORT", str(closed_port))
    env.setenv("LOCKGUARD_REDIS_TIMEOUT_SECONDS", "2")
    code, out = run("scan", *json_flag)
    assert code == 3
    assert out == ""  # nothing half-written for a script to misread
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert f"127.0.0.1:{closed_port}" in err
    assert "Traceback" not in err


WRONG = "not-the-Passw0rd-91c2"


@pytest.mark.parametrize(
    "how",
    ["REDIS_PASSWORD", "REDIS_URL", "REDIS_URL+REDIS_PASSWORD", "no password"],
)
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_wrong_password_exits_3_and_never_shows_a_password(
    env: pytest.MonkeyPatch,
    auth_redis_server: object,
    auth_redis_password: str,
    capsys: pytest.CaptureFixture[str],
    how: str,
    json_flag: list[str],
) -> None:
    port = auth_redis_server.port  # type: ignore[attr-defined]
    if how == "REDIS_PASSWORD":
        env.setenv("REDIS_HOST", "127.0.0.1")
        env.setenv("REDIS_PORT", str(port))
        env.setenv("REDIS_PASSWORD", WRONG)
    elif how == "REDIS_URL":
        env.setenv("REDIS_URL", f"redis://:{WRONG}@127.0.0.1:{port}/0")
    elif how == "REDIS_URL+REDIS_PASSWORD":
        env.setenv("REDIS_URL", f"redis://default:{WRONG}@127.0.0.1:{port}/0")
        env.setenv("REDIS_PASSWORD", WRONG + "-too")
    else:
        env.setenv("REDIS_HOST", "127.0.0.1")
        env.setenv("REDIS_PORT", str(port))
    admin = redis.Redis(host="127.0.0.1", port=port, password=auth_redis_password)
    connections = admin.info("stats")["total_connections_received"]
    code, out = run("scan", *json_flag)
    captured = capsys.readouterr()
    # A refusal is final: at most one quick retry, not a storm of AUTH attempts.
    assert admin.info("stats")["total_connections_received"] - connections <= 2
    admin.close()
    assert code == 3
    assert out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert f"127.0.0.1:{port}" in captured.err
    for text in (out, captured.out, captured.err):
        assert WRONG not in text
        assert auth_redis_password not in text


def test_right_password_scans(
    env: pytest.MonkeyPatch,
    auth_redis_server: object,
    auth_redis_password: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = auth_redis_server.port  # type: ignore[attr-defined]
    client = redis.Redis(host="127.0.0.1", port=port, password=auth_redis_password)
    client.flushall()
    client.set(b"lock:forever", b"tok")
    env.setenv("REDIS_URL", f"redis://127.0.0.1:{port}/0")
    env.setenv("REDIS_PASSWORD", auth_redis_password)
    code, out = run("scan", "--json")
    captured = capsys.readouterr()
    assert code == 1
    assert json.loads(out)["findings"][0]["reason"] == "infinite_ttl"
    for text in (out, captured.out, captured.err):
        assert auth_redis_password not in text
    client.flushall()
    client.close()
