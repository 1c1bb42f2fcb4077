"""The one-active-replica lease (`bot.ops.leader`) on real redis-servers (and fakeredis for
logic), kept by the heartbeat every `serve` runs (`bot.ops.shards`): here over one Redis, the
fleet of one there is without a targets file."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from bot.ops.leader import Leader, replica_id
from bot.ops.shards import Shards, Visit
from bot.store import lease_keys
from bot.store.keyspace import LEADER
from tests.conftest import RedisServer

LEASE_MS = 1_000


def one(leader: Leader) -> Shards:
    """The heartbeat of a replica serving one Redis (no targets file): a fleet of one."""
    return Shards({"default": leader}, lease_ms=leader.lease_ms, replica=leader.replica)


def lead(shards: Shards) -> Leader:
    return shards.leaders["default"]


@pytest.fixture
def leaders(redis_server: RedisServer, real_redis: redis.Redis) -> Iterator[list[Shards]]:
    """Two replicas' heartbeats, each on its own connection to one Redis."""
    made = [
        one(Leader(redis_server.client(), lease_ms=LEASE_MS, replica=f"replica-{n}")) for n in "ab"
    ]
    yield made
    for shards in made:
        shards.stop(release=False)
        lead(shards).client.close()


def wait_for(condition, timeout: float) -> float:  # type: ignore[no-untyped-def]
    """Seconds until `condition()` held; fails after `timeout`."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, "condition not met in time"
        time.sleep(0.005)
    return time.monotonic() - start


def test_replica_id_is_host_and_pid() -> None:
    assert replica_id() == f"{socket.gethostname()}:{os.getpid()}"
    assert Leader(redis.Redis(), lease_ms=LEASE_MS).replica == replica_id()


def test_exactly_one_of_two_acquires(r: redis.Redis) -> None:
    a, b = (Leader(r, lease_ms=LEASE_MS, replica=n) for n in ("a", "b"))
    assert a.try_acquire()
    assert not b.try_acquire()
    assert a.is_leader()
    assert not b.is_leader()
    assert a.try_acquire()  # already ours: renewed
    ttl = r.pttl(LEADER)
    assert 0 < ttl <= LEASE_MS  # always with an expiry
    stored = json.loads(r.get(LEADER))
    assert set(stored) == {"token", "replica", "since_ms"}
    assert stored["replica"] == "a"
    assert len(stored["token"]) == 32


def test_with_heartbeats_exactly_one_leads(leaders: list[Shards]) -> None:
    for shards in leaders:
        shards.start()
    wait_for(lambda: any(lead(x).is_leader() for x in leaders), 1.0)
    for _ in range(10):  # over several renewals (every lease/3)
        assert [lead(x).is_leader() for x in leaders].count(True) == 1
        time.sleep(0.1)


def test_holder_names_the_replica_never_the_token(r: redis.Redis) -> None:
    a, b = (Leader(r, lease_ms=LEASE_MS, replica=n) for n in ("host-a:1", "host-b:2"))
    assert a.holder() is None
    before = int(r.time()[0]) * 1000
    assert a.try_acquire()
    seen_by_a, seen_by_b = a.holder(), b.holder()
    assert seen_by_a is not None
    assert seen_by_b is not None
    assert seen_by_a.replica == seen_by_b.replica == "host-a:1"
    assert (seen_by_a.me, seen_by_b.me) == (True, False)
    assert seen_by_a.since_ms >= before
    assert 0 < seen_by_b.ttl_ms <= LEASE_MS
    assert "token" not in repr(seen_by_a)


def test_a_leader_whose_lease_was_taken_stops_at_its_next_renewal(r: redis.Redis) -> None:
    a = Leader(r, lease_ms=LEASE_MS, replica="a")
    assert a.try_acquire()
    r.set(LEADER, b'{"token":"someone-else","replica":"b","since_ms":1}', px=LEASE_MS)
    assert a.is_leader()  # it cannot know before it asks...
    assert not a.renew()
    assert not a.is_leader()  # ...and is not leader the moment it does
    assert r.get(LEADER) == b'{"token":"someone-else","replica":"b","since_ms":1}'  # untouched
    assert 0 < r.pttl(LEADER) <= LEASE_MS


def test_the_token_compare_is_on_the_exact_stored_bytes(r: redis.Redis) -> None:
    a = Leader(r, lease_ms=LEASE_MS, replica="a")
    assert a.try_acquire()
    same_fields = json.loads(r.get(LEADER))
    r.set(LEADER, json.dumps(same_fields), px=LEASE_MS)  # same token, other bytes (spaces)
    assert not a.renew()
    assert not a.is_leader()
    assert not a.release()
    assert r.exists(LEADER)


def test_release_never_deletes_another_replicas_lease(r: redis.Redis) -> None:
    a, b = (Leader(r, lease_ms=LEASE_MS, replica=n) for n in ("a", "b"))
    assert a.try_acquire()
    r.delete(LEADER)  # a's lease lapsed (a paused process, say) ...
    assert b.try_acquire()  # ... and b took over
    theirs = r.get(LEADER)
    assert not a.release()  # a wakes up and gives back what it thinks is its lease
    assert r.get(LEADER) == theirs
    assert b.is_leader()
    assert not a.is_leader()
    assert b.release()
    assert not r.exists(LEADER)
    assert not b.is_leader()


def test_a_leader_that_cannot_renew_stops_before_its_lease_can_lapse(
    real_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = Leader(real_redis, lease_ms=LEASE_MS, margin_ms=200, replica="a")
    assert a.try_acquire()

    def unreachable(*_: object) -> bool:
        raise redis.ConnectionError("Connection refused")

    monkeypatch.setattr(lease_keys, "renew", unreachable)
    assert not a.renew()  # Redis unreachable: still leader until the local deadline
    assert a.is_leader()
    wait_for(lambda: not a.is_leader(), LEASE_MS / 1000)
    remaining = real_redis.pttl(LEADER)
    assert remaining > 100  # it stopped leading while its lease still stood: nobody else leads
    b = Leader(real_redis, lease_ms=LEASE_MS, replica="b")
    assert not b.try_acquire()


def test_local_deadline_is_lease_minus_margin_from_before_the_request(r: redis.Redis) -> None:
    now = [100.0]
    a = Leader(r, lease_ms=10_000, replica="a", clock=lambda: now[0])
    assert a.margin_ms == 2_000  # a fifth of the lease by default
    assert a.try_acquire()
    now[0] = 107.99
    assert a.is_leader()
    now[0] = 108.0
    assert not a.is_leader()
    assert a.renew()  # still ours in Redis: renewed, leads again until 8 s from now
    now[0] = 115.9
    assert a.is_leader()


def test_when_the_leader_dies_the_other_takes_over_within_one_lease(leaders: list[Shards]) -> None:
    for shards in leaders:
        shards.start()
    wait_for(lambda: any(lead(x).is_leader() for x in leaders), 1.0)
    dead = next(x for x in leaders if lead(x).is_leader())
    other = next(x for x in leaders if x is not dead)
    dead.stop(release=False)  # as SIGKILL would: no release, the heartbeat just stops
    took = wait_for(lead(other).is_leader, LEASE_MS / 1000 + 1.0)
    # Within one lease of the last heartbeat: the follower wakes when the lease would lapse.
    # The slack is for a loaded machine's scheduling (a 2-core CI box ran 50 ms over once),
    # not for the product: a follower that waited a whole beat more would be 0.33 s late.
    assert took <= LEASE_MS / 1000 + 0.25
    assert not lead(dead).is_leader()


def test_a_follower_that_reads_a_lease_about_to_lapse_looks_again_at_once(r: redis.Redis) -> None:
    """PTTL 0 (the other's lease lapses within the millisecond): the next beat is the shortest
    wait, not a whole beat later (a follower once took over lease/3 late after reading 0)."""
    shards = one(Leader(r, lease_ms=LEASE_MS, replica="b"))
    for ttl, wait in (
        (0, 0.05),
        (1, 0.05),
        (200, 0.205),
        (900, LEASE_MS / 3000),
        (-2, LEASE_MS / 3000),
    ):
        assert shards._wait({"default": Visit(2, ttl)}, set()) == pytest.approx(wait)
    assert shards._wait({"default": Visit(2, 0)}, {"default"}) == pytest.approx(LEASE_MS / 3000)


def test_a_graceful_stop_hands_over_at_once(leaders: list[Shards]) -> None:
    for shards in leaders:
        shards.start()
    wait_for(lambda: any(lead(x).is_leader() for x in leaders), 1.0)
    first = next(x for x in leaders if lead(x).is_leader())
    other = next(x for x in leaders if x is not first)
    first.stop()  # releases: the other need not wait for the lease to lapse
    assert wait_for(lead(other).is_leader, 1.0) < LEASE_MS / 3000 + 0.1


def test_listeners_hear_each_change(r: redis.Redis) -> None:
    a = Leader(r, lease_ms=LEASE_MS, replica="a")
    beats = one(a)
    heard: list[bool] = []
    a.on_change(heard.append)
    a.on_change(lambda _: 1 / 0)  # a failing listener is logged, the others still hear
    beats.beat()
    beats.beat()
    r.set(LEADER, b"taken", px=LEASE_MS)
    beats.beat()
    assert heard == [True, False]
    r.delete(LEADER)
    # free again: taken, next beat as usual (less the beat's own time)
    assert beats.beat() == pytest.approx(LEASE_MS / 3000, abs=0.05)
    assert heard == [True, False, True]
    beats.stop()
    assert heard == [True, False, True, False]
    assert not r.exists(LEADER)


def test_follower_waits_for_the_lease_to_lapse_not_longer(r: redis.Redis) -> None:
    a, b = (Leader(r, lease_ms=3_000, replica=n) for n in ("a", "b"))
    assert a.try_acquire()
    set_at = time.monotonic()
    r.pexpire(LEADER, 200)
    sleep = one(b).beat()
    left = 0.2 - (time.monotonic() - set_at)  # at most this much of a's lease was left
    assert left - 0.01 <= sleep <= 0.21  # wakes just after a's lease would lapse, not later
    time.sleep(0.21)
    # it leads: the usual beat, a third of the lease (less the beat's own time)
    assert one(b).beat() == pytest.approx(1.0, abs=0.05)
    assert b.is_leader()


def test_many_replicas_racing_give_one_leader(
    redis_server: RedisServer, real_redis: redis.Redis
) -> None:
    made = [Leader(redis_server.client(), lease_ms=LEASE_MS, replica=str(n)) for n in range(8)]
    barrier = threading.Barrier(len(made))
    won: list[bool] = [False] * len(made)

    def race(n: int) -> None:
        barrier.wait()
        won[n] = made[n].try_acquire()

    threads = [threading.Thread(target=race, args=(n,)) for n in range(len(made))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert won.count(True) == 1
    assert [m.is_leader() for m in made].count(True) == 1
    for m in made:
        m.client.close()
