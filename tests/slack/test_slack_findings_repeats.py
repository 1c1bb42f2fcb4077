"""The same findings are not posted again by every scheduled scan, also when there are more flagged
locks than a message lists (found by bench/fleet_bench.py's serve mode: 1,000 flagged locks per
Redis were posted again every minute), and a change in any flagged lock is news again."""

from __future__ import annotations

import base64
import os
import time

import redis

from bot.core.rules import Policy
from bot.scan.loop import run_scan
from bot.scan.result import ScanOptions
from bot.serve.operations import Tuning
from tests.core.test_layouts import uuid1_hex
from tests.slack_app_harness import ALERTS, Factory
from tests.slack_app_harness import slack_app as slack_app  # the fixture

FLAGGED = 2_000  # many more than a message lists (LISTED), read in 8 batches (BATCH_KEYS)


def plant_fresh(r: redis.Redis, n: int, prefix: bytes = b"lock:fresh:") -> None:
    """n python-redis-lock style locks (a random token that tells no time) with no TTL: flagged
    (`infinite_ttl`), not yet releasable; how long each is held is what lockguard saw."""
    with r.pipeline(transaction=False) as p:
        for i in range(n):
            p.set(prefix + b"%d" % i, base64.b64encode(os.urandom(18)))
        p.execute()


def scans_recorded(r: redis.Redis) -> int:
    return sum(1 for _, f in r.xrange(b"{lockguard}:audit") if f[b"event"] == b"scan")


def findings_posts(app: object) -> list[object]:
    calls = app.fake.calls("chat.postMessage")  # type: ignore[attr-defined]
    return [c for c in calls if c.body.get("channel") == ALERTS and not c.body.get("thread_ts")]


def wait_for_scans(r: redis.Redis, n: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while scans_recorded(r) < n:
        assert time.monotonic() < deadline, f"fewer than {n} scans in {timeout} s"
        time.sleep(0.05)


def test_more_flagged_locks_than_listed_are_posted_once_not_every_tick(
    slack_app: Factory, real_redis: redis.Redis
) -> None:
    plant_fresh(real_redis, FLAGGED)
    # SCAN COUNT 10: the locks are read in many batches, a few milliseconds apart, so which
    # LISTED of them a scan keeps changes from scan to scan.
    app = slack_app(
        tuning=Tuning(lease_ms=1_000, check_every_s=0.1),
        LOCKGUARD_SCAN_SCHEDULE="every 1s",
        LOCKGUARD_SCAN_COUNT="10",
    )
    wait_for_scans(real_redis, 4)
    [posted] = findings_posts(app)
    assert f"{FLAGGED:,} locks flagged" in posted.body["text"]  # type: ignore[attr-defined]
    # One more flagged lock, beyond those the message lists: news, posted again.
    plant_fresh(real_redis, 1, prefix=b"lock:late:")
    before = scans_recorded(real_redis)
    wait_for_scans(real_redis, before + 2)
    assert len(findings_posts(app)) == 2


def test_the_flagged_digest_is_the_flagged_locks_whatever_is_kept(real_redis: redis.Redis) -> None:
    plant_fresh(real_redis, 120)
    real_redis.set(b"lock:healthy", uuid1_hex(int(time.time() * 1000)), px=3_600_000)
    options = ScanOptions(
        patterns=[b"lock:*"], policy=Policy(stale_threshold_ms=30_000), scan_count=10
    )
    first = run_scan(real_redis, options, keep=5)
    again = run_scan(real_redis, options, keep=50)
    assert first.findings == again.findings == 120
    assert first.flagged_digest == again.flagged_digest != 0
    real_redis.delete(b"lock:fresh:7")  # the same count, another lock: another digest
    plant_fresh(real_redis, 1, prefix=b"lock:other:")
    swapped = run_scan(real_redis, options, keep=5)
    assert swapped.findings == 120
    assert swapped.flagged_digest != first.flagged_digest
    real_redis.pexpire(b"lock:other:0", 3_600_000)  # now healthy: no longer flagged
    assert run_scan(real_redis, options, keep=5).flagged_digest != swapped.flagged_digest
