"""The fleet's leader leases (`bot.ops.shards`) on real redis-servers: three live targets and
one whose Redis is down, shared by replicas that beat by hand (no thread, no clock), then by
their own threads: each lease has one holder, nobody holds more than ceil(N/R), a dead replica's
targets are taken within one lease, a new replica gets its share at the next beats, and the dead
target is skipped without stalling the others."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import redis

from bot.demo.embedded import RedisProcess, free_port
from bot.ops.leader import Leader
from bot.ops.shards import Shards, preference, quota
from bot.store.keyspace import LEADER, REPLICAS
from tests.fleet.conftest import DEAD, LIVE

LEASE_MS = 1_500


@pytest.fixture
def clients(servers: dict[str, RedisProcess]) -> Iterator[dict[str, redis.Redis]]:
    """One client per target, each live server flushed; the dead target's port has no server."""
    out = {name: server.client() for name, server in servers.items()}
    for c in out.values():
        c.flushall()
    out[DEAD] = redis.Redis(
        host="127.0.0.1", port=free_port(), socket_timeout=0.5, socket_connect_timeout=0.5
    )
    yield out
    for c in out.values():
        c.close()


def replica(clients: dict[str, redis.Redis], name: str) -> Shards:
    leaders = {
        target: Leader(client, lease_ms=LEASE_MS, replica=name)
        for target, client in clients.items()
    }
    return Shards(leaders, lease_ms=LEASE_MS, replica=name)


def holders(clients: dict[str, redis.Redis]) -> dict[str, str | None]:
    """target -> the replica id in its Redis's lease (None: free); the dead target left out."""
    out: dict[str, str | None] = {}
    for name in LIVE:
        raw = clients[name].get(LEADER)
        out[name] = json.loads(raw)["replica"] if isinstance(raw, bytes) else None
    return out


@pytest.mark.parametrize(
    ("targets", "replicas", "expected"), [(4, 1, 4), (4, 2, 2), (4, 3, 2), (3, 4, 1), (30, 3, 10)]
)
def test_quota_is_ceil_of_targets_over_live_replicas(
    targets: int, replicas: int, expected: int
) -> None:
    assert quota(targets, replicas) == expected


def test_replicas_prefer_the_targets_in_different_orders() -> None:
    names = [f"t{i}" for i in range(12)]
    assert sorted(preference(names, "a")) == sorted(names)
    assert preference(names, "a") != preference(names, "b")
    assert preference(names, "a") == preference(list(reversed(names)), "a")  # stable


def test_two_replicas_split_the_live_targets_and_skip_the_dead_one(
    clients: dict[str, redis.Redis],
) -> None:
    a, b = replica(clients, "a"), replica(clients, "b")
    started = time.monotonic()
    a.beat()  # alone so far: R = 1, it may take every live target
    assert time.monotonic() - started < 5  # the dead target's timeout does not add up per call
    assert set(a.held()) == set(LIVE)
    assert not a.leaders[DEAD].is_leader()
    b.beat()  # counts two replicas; every lease is held, so it takes none yet
    assert b.held() == []
    assert a.beat() > 0  # A sees R = 2, quota ceil(4/2) = 2: gives its least preferred back
    assert a.quota == 2
    assert len(a.held()) == 2
    b.beat()  # and B takes it
    assert len(b.held()) == 1
    assert set(a.held()) | set(b.held()) == set(LIVE)
    assert not set(a.held()) & set(b.held())
    assert holders(clients) == {n: "a" if n in a.held() else "b" for n in LIVE}
    for _ in range(3):  # stable: nobody moves once shared
        a.beat()
        b.beat()
    assert holders(clients) == {n: "a" if n in a.held() else "b" for n in LIVE}
    assert {m.decode() for m in clients["orders"].zrange(REPLICAS, 0, -1)} == {"a", "b"}


def test_a_stopped_replica_gives_its_leases_back_and_leaves_the_count(
    clients: dict[str, redis.Redis],
) -> None:
    a, b = replica(clients, "a"), replica(clients, "b")
    for s in (a, b, a, b):
        s.beat()
    a.stop()
    assert all(v != "a" for v in holders(clients).values())
    assert clients["orders"].zrange(REPLICAS, 0, -1) == [b"b"]
    b.beat()
    assert set(b.held()) == set(LIVE)


def test_threads_hand_a_killed_replicas_targets_over_within_one_lease(
    clients: dict[str, redis.Redis],
) -> None:
    a, b = replica(clients, "a"), replica(clients, "b")
    a.start()
    b.start()
    try:
        deadline = time.monotonic() + 5
        while not (a.held() and b.held() and set(a.held()) | set(b.held()) == set(LIVE)):
            assert time.monotonic() < deadline, (a.held(), b.held())
            time.sleep(0.02)
        assert not set(a.held()) & set(b.held())
        a.stop(release=False)  # as SIGKILL would: nothing given back, heartbeats left to lapse
        killed = time.monotonic()
        while set(b.held()) != set(LIVE):
            assert time.monotonic() - killed < LEASE_MS / 1000 + 1.0, b.held()
            time.sleep(0.01)
        took = time.monotonic() - killed
        # within one lease of the killed replica's last beat (before `killed`), plus the time a
        # loaded 2-core runner takes to schedule the survivor's thread and its round trips: a
        # clean CI run once measured 1.995 s here against 1.5 + 0.2
        assert took <= LEASE_MS / 1000 + 0.6
        c = replica(clients, "c")  # a new replica: the share spreads again at the next beats
        c.start()
        try:
            deadline = time.monotonic() + 3 * LEASE_MS / 1000
            while not c.held():
                assert time.monotonic() < deadline
                time.sleep(0.02)
            assert len(b.held()) <= 2
            assert not set(b.held()) & set(c.held())
        finally:
            c.stop()
    finally:
        a.stop(release=False)
        b.stop()
