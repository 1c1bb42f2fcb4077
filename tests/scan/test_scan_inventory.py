"""What a scan keeps for digests and the Home tab: the oldest locks whatever their verdict, an age
histogram and the keys read per pattern, also in the summary stored as the last scan."""

from __future__ import annotations

import redis

from bot.core.model import Reason
from bot.core.rules import Policy
from bot.scan.loop import run_scan
from bot.scan.result import AGE_LABELS, OLDEST_KEPT, ScanOptions
from bot.store import scans
from tests.core.test_layouts import uuid1_hex

HOUR_MS = 3_600_000


def test_the_oldest_locks_are_kept_healthy_ones_included_with_a_histogram(r: redis.Redis) -> None:
    now_ms = int(r.time()[0]) * 1000
    # A healthy lock: a TTL, taken (its uuid1 token says) 3 days ago.
    r.set(b"lock:nightly", uuid1_hex(now_ms - 72 * HOUR_MS), px=600_000)
    r.set(b"lock:hourly", uuid1_hex(now_ms - 2 * HOUR_MS), px=600_000)
    for i in range(20):
        r.set(b"job:fresh:%d" % i, uuid1_hex(now_ms - 1_000), px=600_000)
    r.set(b"lock:stats", b'{"total": 3}')  # not a lock: neither aged nor counted in the bins
    policy = Policy(stale_threshold_ms=30 * 24 * HOUR_MS, flag_infinite_ttl=False)
    result = run_scan(r, ScanOptions([b"lock:*", b"job:*"], policy), keep=5)

    assert result.by_reason[Reason.HEALTHY] == 22
    assert [f.key for f in result.oldest[:2]] == [b"lock:nightly", b"lock:hourly"]
    assert len(result.oldest) == OLDEST_KEPT
    assert 71 * 3600 < result.oldest[0].held_seconds < 73 * 3600
    hist = dict(zip(AGE_LABELS, result.age_histogram, strict=True))
    assert hist == {"<1m": 20, "<15m": 0, "<1h": 0, "<6h": 1, "<1d": 0, "<7d": 1, ">=7d": 0}
    assert result.by_pattern == {b"lock:*": 3, b"job:*": 20}

    last = scans.last_scan(r)
    assert last is not None
    assert last["by_pattern"] == {"lock:*": 3, "job:*": 20}
    assert last["age_histogram"] == hist
    assert last["oldest"][0]["key"] == "lock:nightly"
    assert last["oldest"][0]["reason"] == "healthy"
