"""A narrowed scan (`/lockguard scan lock:y:*` under `lock:*`) keeps the tenure history of every
lock it did not cover and adds to the history of those it did, on one server (fakeredis and a
real redis-server) and on a Redis Cluster; a case lock outside the configured patterns is
never released, whatever its case says."""

from __future__ import annotations

import pytest
import redis
from redis.cluster import RedisCluster

from bot.cases.reclaim_config import ReclaimConfig
from bot.core.errors import ScanBusyError
from bot.core.model import Finding
from bot.core.rules import Policy
from bot.engine import Engine
from bot.release import Outcome
from bot.scan.result import ScanOptions
from bot.store import keyspace, scans
from tests.core.test_layouts import uuid1_hex

POLICY = Policy(stale_threshold_ms=60_000)
TWO_HOURS_MS = 7_200_000


def engine(client: redis.Redis, patterns: tuple[bytes, ...] = (b"lock:*",)) -> Engine:
    cfg = ReclaimConfig(dry_run=False, policy=POLICY, patterns=patterns)
    return Engine(client, ScanOptions(list(patterns), POLICY), cfg, endpoint="redis://test:1/0")


def seen(e: Engine, **kw: object) -> dict[bytes, Finding]:
    result, _ = e.scan(keep=500, propose=False, **kw)  # type: ignore[arg-type]
    return {f.key: f for f in result.worst}


def plant(client: redis.Redis, keys: list[bytes]) -> None:
    now_ms = int(client.time()[0]) * 1000
    for k in keys:
        client.set(k, uuid1_hex(now_ms - TWO_HOURS_MS))


def check_history_kept(client: redis.Redis, xs: list[bytes], ys: list[bytes]) -> None:
    plant(client, xs + ys)
    e = engine(client)
    first = seen(e)
    assert {k: f.observations for k, f in first.items()} == dict.fromkeys(xs + ys, 1)
    summary = scans.last_scan(client)
    for _ in range(3):
        narrow = seen(e, pattern="lock:y:*")
        assert set(narrow) == set(ys)
    assert scans.last_scan(client) == summary  # the last full scan's summary stays
    again = seen(e)
    assert {k: again[k].observations for k in xs} == dict.fromkeys(xs, 2)  # nothing lost
    assert {k: again[k].observations for k in ys} == dict.fromkeys(ys, 5)  # 1 + 3 narrow + 1
    assert all(again[k].held_seconds >= first[k].held_seconds for k in xs + ys)


def test_a_narrow_scan_keeps_everyone_elses_history(r: redis.Redis) -> None:
    check_history_kept(r, [b"lock:x:1", b"lock:x:2"], [b"lock:y:1"])


def test_a_narrow_scan_before_any_full_scan_keeps_what_it_saw(r: redis.Redis) -> None:
    plant(r, [b"lock:y:1", b"lock:x:1"])
    e = engine(r)
    assert set(seen(e, pattern="lock:y:*")) == {b"lock:y:1"}
    assert scans.last_scan(r) is None  # a narrow scan is not "the last scan"
    full = seen(e)
    assert (full[b"lock:y:1"].observations, full[b"lock:x:1"].observations) == (2, 1)


def test_a_narrow_scan_keeps_everyone_elses_history_on_a_cluster(rc: RedisCluster) -> None:
    xs = [f"lock:x:{i}".encode() for i in range(40)]  # spread over every primary's slots
    ys = [f"lock:y:{i}".encode() for i in range(20)]
    check_history_kept(rc, xs, ys)  # type: ignore[arg-type]


def test_a_case_lock_outside_the_configured_patterns_is_never_released(
    real_redis: redis.Redis,
) -> None:
    """Patterns narrowed since the case was opened (or a case edited by hand): the recheck
    refuses the key before anything reads or deletes it."""
    plant(real_redis, [b"lock:a", b"session:abc"])
    wide = engine(real_redis, (b"lock:*", b"session:*"))
    _, case = wide.scan()  # uuid1 tokens: held two hours on first sight
    assert case is not None
    assert {lk.key for lk in case.locks} == {b"lock:a", b"session:abc"}
    report = engine(real_redis).approve(case.id, "ann")
    by_key = {o.lock.key: o for o in report.outcomes}
    assert by_key[b"session:abc"].outcome == Outcome.SKIPPED_UNPROVEN.value
    assert "outside the configured lock patterns" in by_key[b"session:abc"].detail
    assert real_redis.exists(b"session:abc") == 1
    assert by_key[b"lock:a"].outcome == Outcome.RELEASED.value
    assert real_redis.exists(b"lock:a") == 0


def test_a_narrow_scan_that_lost_its_lease_writes_nothing_more(r: redis.Redis) -> None:
    """Another scan took the lease over (this one stalled past its minute): the merge stops
    before its first write, and the table the other scan is writing is left alone."""
    plant(r, [b"lock:x:1", b"lock:y:1"])
    engine(r).scan(propose=False)  # history in force: generation 1
    gen = scans.current_gen(r)
    before = r.hgetall(keyspace.tenure_table(gen))
    token, _ = scans.begin_scan(r, "slash U0ALICE")
    scans.write_tenures(r, gen + 1, {b"lock:y:1": b"record of the stalled scan"})
    r.set(keyspace.SCAN_LEASE, b"other|schedule", px=60_000)  # taken over
    r.hset(keyspace.tenure_table(gen + 1), b"lock:x:1", b"the other scan's record")
    with pytest.raises(ScanBusyError, match="another scan took over"):
        scans.commit_narrowed(r, token, gen)
    assert r.hgetall(keyspace.tenure_table(gen)) == before  # nothing merged
    assert r.hget(keyspace.tenure_table(gen + 1), b"lock:x:1") == b"the other scan's record"
    assert r.get(keyspace.SCAN_LEASE) == b"other|schedule"
