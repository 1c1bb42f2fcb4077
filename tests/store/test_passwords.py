"""A Redis that needs a password, on a real redis-server with `requirepass`: sending none is told
apart from sending a wrong one, each one stderr line naming what to set, never the password."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
import redis

from bot.cli import main
from bot.store.connection import describe
from tests.conftest import RedisServer


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("LOCKGUARD_AUTO_REMEDIATE", "false")
    return monkeypatch


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv), out=StringIO())
    return code, capsys.readouterr().err


@pytest.mark.parametrize("command", ["check", "scan"])
def test_no_password_for_a_server_that_needs_one_says_so_and_names_redis_password(
    env: pytest.MonkeyPatch,
    auth_redis_server: RedisServer,
    capsys: pytest.CaptureFixture[str],
    command: str,
) -> None:
    env.setenv("REDIS_HOST", "127.0.0.1")
    env.setenv("REDIS_PORT", str(auth_redis_server.port))
    code, err = run(capsys, command)
    assert code == 3
    [line] = err.strip().splitlines()
    assert line == (
        f"lockguard: error: Redis at redis://127.0.0.1:{auth_redis_server.port}/0 needs a "
        "password (NOAUTH), and none was sent: set REDIS_PASSWORD (or user:password in "
        "REDIS_URL for an ACL user)"
    )
    assert "refused the credentials" not in err


def test_a_wrong_password_is_still_refused_credentials_and_never_shown(
    env: pytest.MonkeyPatch,
    auth_redis_server: RedisServer,
    auth_redis_password: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wrong = "not-" + auth_redis_password
    for name, value in (
        ("REDIS_PASSWORD", wrong),
        ("REDIS_URL", f"redis://:{wrong}@127.0.0.1:{auth_redis_server.port}/0"),
    ):
        env.setenv("REDIS_HOST", "127.0.0.1")
        env.setenv("REDIS_PORT", str(auth_redis_server.port))
        env.setenv(name, value)
        code, err = run(capsys, "check")
        env.delenv(name)
        assert code == 3
        assert "refused the credentials (check REDIS_PASSWORD" in err
        assert "NOAUTH" not in err
        assert wrong not in err


def test_the_right_password_connects(
    env: pytest.MonkeyPatch,
    auth_redis_server: RedisServer,
    auth_redis_password: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env.setenv("REDIS_URL", f"redis://:{auth_redis_password}@127.0.0.1:{auth_redis_server.port}")
    code, err = run(capsys, "check")
    assert (code, err) == (0, "")


@pytest.mark.parametrize("protocol", [2, 3])
def test_noauth_is_recognised_on_either_protocol_and_in_a_pipeline(
    auth_redis_server: RedisServer, protocol: int
) -> None:
    client = redis.Redis(port=auth_redis_server.port, protocol=protocol)
    try:
        pipe = client.pipeline(transaction=False)
        pipe.get(b"lock:a")
        with pytest.raises(redis.AuthenticationError) as info:
            pipe.execute()
    finally:
        client.close()
    assert "needs a password (NOAUTH)" in str(describe(info.value, "redis://x:1/0"))
