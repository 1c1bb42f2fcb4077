"""Shared fixtures: one `redis` fixture, two backends (fakeredis and a real redis-server).

The real server is started once per test session on a free loopback port with no persistence,
and each test gets a flushed database. A missing `redis-server` skips the real half locally but
fails under CI=true (so CI can never pass without testing real Redis semantics).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NoReturn

import fakeredis
import pytest
import redis
from hypothesis import HealthCheck, settings
from redis.client import Pipeline

from bot.demo.embedded import RedisProcess, free_port

pytest_plugins = ["tests.cluster_fixtures"]  # `cluster`, `rc`

_ENV_PREFIXES = ("LOCKGUARD_", "SLACK_", "REDIS_")

# `lockguard` on PATH is this venv's, as after `source .venv/bin/activate`: the next steps
# lockguard prints then name it `lockguard` (`bot.core.invocation`; tested on its own there).
os.environ["PATH"] = os.path.join(sys.prefix, "bin") + os.pathsep + os.environ.get("PATH", "")

# The property tests assert what the builders produce, not how fast: with the suite on every
# core (`./dev.sh test` runs pytest-xdist), a busy machine must not turn a slow example into a
# failure. Examples per test stay each test's own (Hypothesis' default unless it sets them).
settings.register_profile("lockguard", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("lockguard")


@pytest.fixture(autouse=True)
def _clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see the developer's own configuration."""
    for name in list(os.environ):
        if name.startswith(_ENV_PREFIXES) or name == "PORT":
            monkeypatch.delenv(name, raising=False)


class RedisServer(RedisProcess):
    """A throwaway redis-server on 127.0.0.1:<free port>, no persistence (see bot.demo.embedded)."""


def missing(what: str) -> NoReturn:
    """A tool a test needs is not on this machine: skipped here, a failure under CI=true (CI
    can never pass without running it)."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{what}, and CI=true runs every test")
    pytest.skip(what)


def start_or_skip(*extra: str) -> RedisServer:
    try:
        return RedisServer(*extra)
    except FileNotFoundError:
        missing("redis-server is not installed")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = start_or_skip()
    yield server
    server.stop()


@pytest.fixture
def real_redis(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis_server.client()
    client.flushall()
    yield client
    client.flushall()
    client.close()


@pytest.fixture
def fake_redis() -> Iterator[redis.Redis]:
    server = fakeredis.FakeServer()
    client = fakeredis.FakeRedis(server=server)
    yield client
    client.close()


@pytest.fixture(
    params=[
        pytest.param("fake", marks=pytest.mark.fake),
        pytest.param("real", marks=pytest.mark.real),
    ]
)
def r(request: pytest.FixtureRequest) -> redis.Redis:
    """The same test on fakeredis and on the real server."""
    name = "fake_redis" if request.param == "fake" else "real_redis"
    return request.getfixturevalue(name)


AUTH_REDIS_PASSWORD = "lg-Test-Passw0rd-7f3a"


@pytest.fixture(scope="session")
def auth_redis_server() -> Iterator[RedisServer]:
    """A second real redis-server that requires the password `AUTH_REDIS_PASSWORD`."""
    server = start_or_skip("--requirepass", AUTH_REDIS_PASSWORD)
    yield server
    server.stop()


@pytest.fixture
def closed_port() -> int:
    """A loopback port nobody listens on (Redis down)."""
    return free_port()


@pytest.fixture(scope="session")
def auth_redis_password() -> str:
    """The password `auth_redis_server` requires."""
    return AUTH_REDIS_PASSWORD


# -- Slack ------------------------------------------------------------------------------------
# The Slack fixtures live in tests/slack_fixtures.py (FakeSlack: tests/slack_mock.py; signed
# requests: tests/slack_requests.py); re-exported here so that pytest finds them everywhere.
from tests.slack_fixtures import fake_slack as fake_slack  # noqa: E402
from tests.slack_fixtures import slack_fake as slack_fake  # noqa: E402

#: One sent pipeline: the arguments of each of its commands, the command's name first.
Stack = list[tuple[Any, ...]]
#: The `count_pipelines` fixture: give it a measure of one pipeline, get the measures' list.
CountPipelines = Callable[[Callable[[Stack], Iterable[int]]], list[int]]


def named(stack: Stack, name: str) -> Stack:
    """The commands of `stack` called `name` (redis-py keeps the name as str or bytes)."""
    return [args for args in stack if args[0] in (name, name.encode())]


@pytest.fixture
def count_pipelines(monkeypatch: pytest.MonkeyPatch) -> CountPipelines:
    """`count_pipelines(measure)`: from now on, what `measure` says of each pipeline sent (a
    list it fills as they go), e.g. how many LRANGEs each one carried."""

    def start(measure: Callable[[Stack], Iterable[int]]) -> list[int]:
        sizes: list[int] = []
        execute = Pipeline.execute

        def counted(self: Pipeline, raise_on_error: bool = True) -> list[object]:
            sizes.extend(measure([args for args, _ in self.command_stack]))
            return execute(self, raise_on_error)

        monkeypatch.setattr(Pipeline, "execute", counted)
        return sizes

    return start
