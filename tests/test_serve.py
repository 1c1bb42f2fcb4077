"""`lockguard serve` start-up and shut-down: what it refuses to start with, what it says when it
starts, and a clean stop on SIGTERM."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
import redis

from bot import cli, serve
from bot.config import load_settings
from bot.core.errors import ConfigError
from bot.demo.embedded import free_port
from tests.slack_app_harness import ALERTS, SECRET, TOKEN, base_env
from tests.slack_fixtures import drop_proxy_settings
from tests.slack_mock import FakeSlack
from tests.slack_requests import post


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlack]:
    drop_proxy_settings(monkeypatch)
    with FakeSlack() as f:
        yield f


@pytest.fixture
def env(
    monkeypatch: pytest.MonkeyPatch, fake: FakeSlack, redis_server: object, real_redis: redis.Redis
) -> dict[str, str]:
    """A complete serve configuration in the environment (each test removes what it needs)."""
    values = {**base_env(redis_server.port, fake), "PORT": "1"}  # type: ignore[attr-defined]
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(os.path.dirname(__file__))  # no stray .env
    return values


def connections(client: redis.Redis) -> int:
    return int(client.info("stats")["total_connections_received"])


def test_missing_slack_settings_exit_2_naming_each_before_anything_starts(
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    fake: FakeSlack,
    real_redis: redis.Redis,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "LOCKGUARD_SLACK_CHANNEL"):
        monkeypatch.delenv(name)
    before = connections(real_redis)
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "LOCKGUARD_SLACK_CHANNEL"):
        assert f"lockguard: error: {name}: " in err
    assert connections(real_redis) == before  # no connection was made to Redis
    assert fake.calls() == []


def test_a_malformed_token_is_named_and_not_printed(
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    fake: FakeSlack,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxp-a-user-token-4f2")
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err
    assert "SLACK_BOT_TOKEN: expected a bot token starting with xoxb-" in err
    assert "xoxp-a-user-token-4f2" not in err
    assert fake.calls() == []


def test_a_token_slack_refuses_exits_2_naming_slack_bot_token(
    env: dict[str, str],
    fake: FakeSlack,
    real_redis: redis.Redis,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake.fail("auth.test", "invalid_auth")
    before = connections(real_redis)
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err
    assert (
        "lockguard: error: SLACK_BOT_TOKEN: Slack refused the bot token (auth.test: "
        "invalid_auth)" in err
    )
    assert TOKEN not in err
    assert "Traceback" not in err
    assert [c.method for c in fake.calls()] == ["auth.test"]  # once
    assert connections(real_redis) == before  # Redis untouched


def test_slack_not_answering_at_start_exits_2_naming_the_url(
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    closed_port: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SLACK_API_URL", f"http://127.0.0.1:{closed_port}/api/")
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err
    assert "SLACK_API_URL: Slack did not answer auth.test" in err
    assert TOKEN not in err


def test_slack_not_answering_at_its_own_url_does_not_name_slack_api_url(
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    closed_port: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # SLACK_API_URL never set: Slack's own URL, unreachable here through a proxy nobody runs
    monkeypatch.delenv("SLACK_API_URL")
    for name in ("HTTPS_PROXY", "https_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{closed_port}")
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err
    assert "Slack: Slack did not answer auth.test at https://slack.com/api/" in err
    assert "check that this machine reaches it (a proxy: HTTPS_PROXY)" in err
    assert "SLACK_API_URL" not in err
    assert TOKEN not in err


def test_socket_mode_refused_exits_2_naming_the_app_token(
    env: dict[str, str], fake: FakeSlack
) -> None:
    settings = load_settings(env={**env, "SLACK_APP_TOKEN": "xapp-1-refused-77"})
    fake.fail("apps.connections.open", "invalid_auth")
    with pytest.raises(ConfigError, match=r"SLACK_APP_TOKEN: .*invalid_auth") as caught:
        serve.start(settings, port=0, err=io.StringIO())
    assert "xapp-1-refused-77" not in str(caught.value)


def test_start_serves_slack_events_and_says_one_line_without_secrets(
    env: dict[str, str], fake: FakeSlack
) -> None:
    settings = load_settings(env={**env, "REDIS_PASSWORD": "pw-never-shown-5"})
    log = io.StringIO()
    served = serve.start(settings, port=0, err=log)
    try:
        assert served.mode == "http"
        assert served.port > 0
        unsigned = post(
            served.url + "/slack/events",
            b"command=%2Flockguard",
            {"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert unsigned.status == 401
        assert post(served.url + "/elsewhere", b"", {}).status == 404
    finally:
        served.stop()
        served.stop()  # twice is fine
    [line] = log.getvalue().splitlines()
    assert line.startswith("lockguard serve: HTTP mode (POST /slack/events) on 127.0.0.1:")
    assert f"channel {ALERTS}" in line
    for secret in (TOKEN, SECRET, "pw-never-shown-5"):
        assert secret not in line


def test_sigterm_stops_serve_cleanly(env: dict[str, str], fake: FakeSlack) -> None:
    child_env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")
    }
    child_env["PORT"] = str(free_port())
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with subprocess.Popen(
        [sys.executable, "-m", "bot", "serve"],
        cwd=root,
        env=child_env,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stderr is not None
            first = child.stderr.readline()
            assert first.startswith("lockguard serve: HTTP mode"), first
            child.send_signal(signal.SIGTERM)
            assert child.wait(timeout=10) == 0
            rest = child.stderr.read()
            assert "stopping" in rest
            assert "Traceback" not in rest
        finally:
            if child.poll() is None:
                child.kill()
    assert [c.method for c in fake.calls()] == ["auth.test"]
