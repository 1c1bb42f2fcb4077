"""A live python-redis-lock holder at realistic settings (`expire=60`, auto-renewal every 40 s)
watched for 100 s by scans at a 30 s threshold, the way the schedule would: never offered, never
put in a case, and its holder's own release at the end succeeds. Real redis-server only."""

from __future__ import annotations

import time

import pytest
import redis

from bot.cases.opening import scan_and_propose
from bot.cases.reclaim_config import ReclaimConfig
from bot.core.model import Layout, Reason
from bot.core.rules import Policy
from bot.scan.result import ScanOptions
from tests.scan.test_real_libraries import holder

pytestmark = pytest.mark.real

POLICY = Policy(stale_threshold_ms=30_000)
OPTS = ScanOptions(patterns=[b"lock:*"], policy=POLICY)
LIVE = ReclaimConfig(
    dry_run=False, release_channel="locks:reclaimed", policy=POLICY, patterns=(b"lock:*",)
)
WATCH_S = 100
EVERY_S = 2.5


def test_a_live_python_redis_lock_renewing_every_40s_is_never_offered(
    real_redis: redis.Redis,
) -> None:
    port = real_redis.connection_pool.connection_kwargs["port"]
    with holder(port, "python-redis-lock", "job", expire=60, renew=True, own_id="") as proc:
        token = real_redis.get(b"lock:job")
        started = time.monotonic()
        seen = []
        while time.monotonic() - started < WATCH_S:
            result, case = scan_and_propose(real_redis, OPTS, LIVE)
            assert case is None, f"a case was opened at {time.monotonic() - started:.0f}s"
            f = {f.key: f for f in result.worst}[b"lock:job"]
            assert f.layout is Layout.PYTHON_REDIS_LOCK
            assert f.identity == token
            assert not f.releasable
            assert f.reason is not Reason.STALE_LEASE, f.renewal
            seen.append(f)
            time.sleep(EVERY_S)
        assert proc.poll() is None
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write("release\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "released"  # no NotAcquired: it still held it
    assert real_redis.exists(b"lock:job") == 0
    assert seen[-1].held_seconds >= WATCH_S - EVERY_S - 1
    assert seen[-1].rearms >= 2  # renewed at 40 s and 80 s, and lockguard saw both
    past = [f for f in seen if f.held_seconds >= 30]
    assert past
    assert {f.reason for f in past} == {Reason.LONG_HELD_RENEWING}
    assert all(f.renewal for f in past)
    assert any(f.renewal.startswith("renewal not due yet") for f in past)
