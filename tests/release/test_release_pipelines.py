"""Many locks released at once: the release scripts go to Redis at most `PIPELINE_CALLS` per
round trip (Redis runs every command of one socket read before it serves anyone else, so one
huge pipeline would hold it for milliseconds), and every lock still gets its own outcome, on
both backends (`r`)."""

from __future__ import annotations

import pytest
import redis

from bot.core.model import Layout, Reason
from bot.release import ApprovedLock, Outcome, Releaser
from bot.release.runner import PIPELINE_CALLS
from tests.conftest import CountPipelines, named


@pytest.fixture
def pipelines(count_pipelines: CountPipelines) -> list[int]:
    """The number of EVALSHA calls each pipeline sent, in order (pipelines with none left out)."""
    return count_pipelines(lambda stack: [n] if (n := len(named(stack, "EVALSHA"))) else [])


def plant(client: redis.Redis, n: int) -> list[ApprovedLock]:
    now_ms = int(client.time()[0]) * 1000
    targets = []
    for i in range(n):
        key, token = b"lock:many:%d" % i, b"token-%d" % i
        client.set(key, token)
        targets.append(
            ApprovedLock(key, Layout.STRING, token, -1, now_ms, None, Reason.INFINITE_TTL)
        )
    return targets


def test_a_big_batch_is_released_in_short_round_trips(r: redis.Redis, pipelines: list[int]) -> None:
    n = 2 * PIPELINE_CALLS + 11
    targets = plant(r, n)
    r.set(targets[40].key, b"a new holder")  # re-acquired since the approval
    results = Releaser(r).release_many([(t, None) for t in targets])
    outcomes = [res.outcome for res in results]
    assert outcomes[40] is Outcome.SKIPPED_REACQUIRED
    assert outcomes[:40] + outcomes[41:] == [Outcome.RELEASED] * (n - 1)
    assert r.get(targets[40].key) == b"a new holder"
    assert not any(r.exists(t.key) for i, t in enumerate(targets) if i != 40)
    assert sum(pipelines[:3]) == n  # every release script sent, in three round trips
    assert max(pipelines) <= PIPELINE_CALLS
