"""The scan lease never outlives its scan: given back however the scan ends (a failed step, a
refused command before the first batch), never deleted once another scan holds it, and the
partial table of a scan that gives up is dropped only while the lease is still its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from bot.core.rules import Policy
from bot.scan.loop import run_scan
from bot.scan.result import ScanOptions
from bot.store import keyspace, scans
from tests.conftest import RedisServer

POLICY = Policy(stale_threshold_ms=60_000)
OPTIONS = ScanOptions([b"lock:*"], POLICY)


def test_a_scan_that_failed_gives_its_lease_back_and_the_next_starts_at_once(
    r: redis.Redis,
) -> None:
    r.set(b"lock:a", b"x")

    def boom(_: object) -> None:
        raise RuntimeError("the step after the last batch failed")

    with pytest.raises(RuntimeError, match="failed"):
        run_scan(r, OPTIONS, before_commit=boom)
    assert not r.exists(keyspace.SCAN_LEASE)
    assert not r.exists(keyspace.tenure_table(1))  # its partial table went with it
    assert run_scan(r, OPTIONS).scanned == 1  # no ScanBusyError: nothing to wait for
    assert not r.exists(keyspace.SCAN_LEASE)


def test_giving_up_after_a_takeover_leaves_the_other_scans_lease_and_table(
    r: redis.Redis,
) -> None:
    token, gen = scans.begin_scan(r, "schedule")
    r.set(keyspace.SCAN_LEASE, b"other|slash U0ALICE", px=60_000)  # this one stalled: taken over
    r.hset(keyspace.tenure_table(gen + 1), b"lock:a", b"the other scan's record")
    scans.abort_scan(r, token, gen)
    assert r.get(keyspace.SCAN_LEASE) == b"other|slash U0ALICE"
    assert r.hget(keyspace.tenure_table(gen + 1), b"lock:a") == b"the other scan's record"


@pytest.fixture
def no_unlink(redis_server: RedisServer, real_redis: redis.Redis) -> Iterator[redis.Redis]:
    """A user that may do everything but UNLINK (nor run scripts)."""
    real_redis.execute_command(
        "ACL", "SETUSER", "no-unlink", "reset", "on", ">pw", "~*", "&*", "+@all", "-unlink"
    )
    real_redis.execute_command("ACL", "SETUSER", "no-unlink", "-@scripting")
    client = redis_server.client(username="no-unlink", password="pw")
    yield client
    client.close()
    real_redis.execute_command("ACL", "DELUSER", "no-unlink")


def test_a_scan_refused_before_its_first_batch_gives_its_lease_back(
    no_unlink: redis.Redis, real_redis: redis.Redis
) -> None:
    """Preparing the next tenure table is refused: the scan fails, its lease is not kept."""
    with pytest.raises(redis.exceptions.NoPermissionError, match="unlink"):
        run_scan(no_unlink, OPTIONS)
    assert not real_redis.exists(keyspace.SCAN_LEASE)
