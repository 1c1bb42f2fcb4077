"""The served fleet's test servers: three live targets' redis-servers (module-scoped), shared by
the serve-over-a-fleet tests; the fourth target, `DEAD`, has no server (a free port)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.demo.embedded import RedisProcess
from tests.conftest import start_or_skip

LIVE = ("orders", "queue", "sessions")
DEAD = "billing"


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, RedisProcess]]:
    """One redis-server per live target (a test module's own `servers` fixture wins)."""
    started = {name: start_or_skip() for name in LIVE}
    yield started
    for server in started.values():
        server.stop()
