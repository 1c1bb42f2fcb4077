"""One case holds every releasable lock a scan finds, up to `CASE_LIMIT` (100,000): past it, the
rest are counted (`over_limit` in the scan's summary) and offered by the next scan's case, once
this one is decided. Real redis-server."""

from __future__ import annotations

import pytest
import redis

from bot.cases import proposal
from bot.cases.approval import approve
from bot.cases.opening import scan_and_propose
from tests.cases.test_reclaim import LIVE, OPTS
from tests.core.test_layouts import uuid1_hex


def plant(r: redis.Redis, n: int) -> list[bytes]:
    """`n` redis-py locks with no TTL, taken two hours ago."""
    old = int(r.time()[0]) * 1000 - 7_200_000
    keys = [f"lock:limit:{i}".encode() for i in range(n)]
    for i, key in enumerate(keys):
        r.set(key, uuid1_hex(old - i))
    return keys


def test_a_case_takes_every_releasable_lock_up_to_the_limit_and_the_rest_come_next(
    real_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(proposal, "CASE_LIMIT", 3)
    keys = plant(real_redis, 5)
    result, case = scan_and_propose(real_redis, OPTS, LIVE, keep=1)  # lists 1, offers 3
    assert case is not None
    assert case.lock_count == 3
    assert result.proposal is not None
    assert result.proposal["over_limit"] == 2
    report = approve(real_redis, case.id, "ann", LIVE)
    assert report.released == 3
    _, second = scan_and_propose(real_redis, OPTS, LIVE, keep=1)
    assert second is not None
    assert second.lock_count == 2
    assert approve(real_redis, second.id, "ann", LIVE).released == 2
    assert real_redis.exists(*keys) == 0


def test_under_the_limit_the_summary_says_nothing_of_it(real_redis: redis.Redis) -> None:
    plant(real_redis, 4)
    result, case = scan_and_propose(real_redis, OPTS, LIVE, keep=1)
    assert case is not None
    assert case.lock_count == 4  # not only the one the scan keeps for its message
    assert result.proposal is not None
    assert "over_limit" not in result.proposal
