"""The keyspace migration: what an earlier version wrote under `lockguard:` is moved to
`{lockguard}:`, once, and still works: tenure history goes on, an open case can be approved."""

from __future__ import annotations

import logging
import threading
import time

import pytest
import redis

from bot.cases.reclaim_config import ReclaimConfig
from bot.core.errors import RedisUnavailableError
from bot.core.model import Reason
from bot.core.rules import Policy
from bot.engine import Engine
from bot.scan.result import ScanOptions
from bot.store import keyspace, migration
from tests.conftest import RedisServer

POLICY = Policy(stale_threshold_ms=200)


def engine(r: redis.Redis) -> Engine:
    return Engine(
        r,
        ScanOptions([b"lock:*"], POLICY),
        ReclaimConfig(policy=POLICY, dry_run=False),
        endpoint="redis://test:1/0",
    )


def to_old_layout(r: redis.Redis) -> dict[bytes, tuple[bytes | None, int]]:
    """Rewrite today's keys as the format-1 layout wrote them (same records, old prefix), and
    return each old key's DUMP and absolute expiry."""
    r.delete(keyspace.KEYSPACE)
    for key in list(r.scan_iter(match=keyspace.PREFIX + b"*")):
        r.rename(key, keyspace.LEGACY_PREFIX + key[len(keyspace.PREFIX) :])
    return {
        k: (r.dump(k), r.pexpiretime(k)) for k in r.scan_iter(match=keyspace.LEGACY_PREFIX + b"*")
    }


def test_an_old_keyspace_is_moved_whole_and_the_history_goes_on(r: redis.Redis) -> None:
    r.set(b"lock:old", b"tok-old")  # no TTL: flagged at once
    e = engine(r)
    first, _ = e.scan(propose=False)
    assert first.by_reason[Reason.INFINITE_TTL] == 1
    before = to_old_layout(r)
    assert keyspace.LEGACY_PREFIX + b"scan:last" in before

    e = engine(r)  # a new process of the new version
    e.cases()  # any first call migrates
    after = {k: (r.dump(k), r.pexpiretime(k)) for k in r.scan_iter(match=keyspace.PREFIX + b"*")}
    assert list(r.scan_iter(match=keyspace.LEGACY_PREFIX + b"*")) == []
    for old, state in before.items():
        assert after[migration.new_name(old)] == state  # same value, same expiry
    assert r.get(keyspace.KEYSPACE) == keyspace.FORMAT

    second, _ = e.scan(propose=False)
    assert second.worst[0].observations == 2  # the tenure history of the old version goes on


def test_an_open_case_of_the_old_layout_is_approved_after_the_move(real_redis: redis.Redis) -> None:
    r = real_redis
    r.set(b"lock:stuck", b"tok-stuck")
    e = engine(r)
    e.scan(propose=False)
    time.sleep(0.3)  # past the threshold
    _, case = e.scan()
    assert case is not None
    to_old_layout(r)

    rep = engine(r).approve(case.id, "ann")
    assert [o.outcome for o in rep.outcomes] == ["released"]
    assert not r.exists(b"lock:stuck")


def test_a_new_key_wins_over_an_old_one_and_the_old_is_kept(
    r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    r.set(keyspace.LEGACY_PREFIX + b"scan:last", b'{"old":1}')
    r.set(keyspace.LAST_SCAN, b'{"new":1}')
    r.set(keyspace.LEGACY_PREFIX + b"scan:lease", b"token-of-an-old-scan", px=60_000)
    with caplog.at_level(logging.WARNING, logger="lockguard.migration"):
        done = migration.ensure(r)
    assert done is not None
    assert (done.moved, done.kept) == (0, 1)
    assert r.get(keyspace.LAST_SCAN) == b'{"new":1}'
    assert r.get(keyspace.LEGACY_PREFIX + b"scan:last") == b'{"old":1}'
    assert r.get(keyspace.LEGACY_PREFIX + b"scan:lease") == b"token-of-an-old-scan"  # lapses
    assert "keyspace_key_kept" in caplog.text
    assert migration.ensure(r) is None  # marked: nothing more to do


@pytest.mark.real
def test_two_processes_at_once_move_each_key_once(
    real_redis: redis.Redis, redis_server: RedisServer
) -> None:
    for i in range(3_000):
        real_redis.set(keyspace.LEGACY_PREFIX + b"leases:%d" % i, b"x")
    results: list[migration.Migration | None] = []

    def run() -> None:
        client = redis_server.client()
        results.append(migration.ensure(client))
        client.close()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done = [m for m in results if m is not None]
    assert len(results) == 3
    assert len(done) == 1
    assert done[0].moved == 3_000
    assert real_redis.get(keyspace.MIGRATING) is None  # released with its token
    assert len(list(real_redis.scan_iter(match=keyspace.PREFIX + b"leases:*"))) == 3_000


def test_a_process_waits_for_another_migration_then_gives_up_clearly(r: redis.Redis) -> None:
    r.set(keyspace.LEGACY_PREFIX + b"cases", b"x")
    r.set(keyspace.MIGRATING, b"someone-else", px=60_000)
    started = time.monotonic()
    with pytest.raises(Exception, match="moving lockguard's keys") as info:
        migration.ensure(r, wait_s=0.3)
    assert time.monotonic() - started < 2
    assert "{lockguard}:migrating" in str(info.value)
    assert r.get(keyspace.LEGACY_PREFIX + b"cases") == b"x"  # nothing touched


@pytest.mark.real
def test_a_user_who_may_not_rename_gets_one_clear_error_and_loses_nothing(
    real_redis: redis.Redis, redis_server: RedisServer
) -> None:
    real_redis.set(keyspace.LEGACY_PREFIX + b"scan:last", b'{"old":1}')
    real_redis.execute_command(
        "ACL", "SETUSER", "norename", "on", ">pw-Nr-9", "~*", "&*", "+@all", "-renamenx"
    )
    try:
        client = redis_server.client(username="norename", password="pw-Nr-9")
        with pytest.raises(RedisUnavailableError) as info:
            engine(client).cases()
        client.close()
    finally:
        real_redis.acl_deluser("norename")
    assert "renamenx" in str(info.value).lower()
    assert "pw-Nr-9" not in str(info.value)
    assert real_redis.get(keyspace.LEGACY_PREFIX + b"scan:last") == b'{"old":1}'
    assert real_redis.get(keyspace.KEYSPACE) is None  # not marked: the next run tries again


def test_a_key_under_the_old_prefix_that_lockguard_never_wrote_is_left_alone(
    r: redis.Redis,
) -> None:
    """An application's own `lockguard:`-named keys (a live lock among them) are not ours."""
    r.set(b"lockguard:deploy-lock", b"tok-live", px=60_000)
    r.set(b"lockguard:case:not-a-case-id", b"x")
    r.set(b"lockguard:leases:gen:extra", b"x")
    r.set(keyspace.LEGACY_PREFIX + b"cases", b"ours")
    done = migration.ensure(r)
    assert done is not None
    assert done.moved == 1
    assert r.get(b"lockguard:deploy-lock") == b"tok-live"
    assert 0 < r.pttl(b"lockguard:deploy-lock") <= 60_000
    assert r.get(b"lockguard:case:not-a-case-id") == b"x"
    assert r.get(b"lockguard:leases:gen:extra") == b"x"
    assert r.get(keyspace.CASES) == b"ours"
