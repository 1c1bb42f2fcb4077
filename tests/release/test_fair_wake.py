"""A released Redisson fair lock wakes its next queued thread, as `RedissonFairLock`'s unlock does:
`0` on that thread's own channel `redisson_lock__channel:{<name>}:<uuid>:<threadId>`, skipping
threads whose timeout has passed, and no write to the queue or its timeouts. The layout is the one
Redisson writes (the lock hash, the queue list of `<uuid>:<threadId>`, the timeout sorted set of
absolute ms); the waiting threads are separate connections subscribed to their own channels."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from bot.core.impact import impact_words
from bot.core.layouts import encode_fields
from bot.core.model import Finding, Layout, Reason
from bot.evidence.reader import read
from bot.release import ApprovedLock, Outcome, Releaser
from bot.release.waiters import fair_keys
from tests.conftest import RedisServer, start_or_skip
from tests.embedded_cluster import EmbeddedCluster
from tests.release.test_release import REDISSON_FIELD, approve, server_ms
from tests.test_acl import acl_page, doc_acl, password

LOCK = b"lock:fair"
QUEUE = b"redisson_lock_queue:{lock:fair}"
TIMEOUTS = b"redisson_lock_timeout:{lock:fair}"
CHANNEL = b"redisson_lock__channel:{lock:fair}"
FIRST = b"0d6f9f9e-2b55-4b4e-9d3e-7b3a1d7f0c11:41"
SECOND = b"0d6f9f9e-2b55-4b4e-9d3e-7b3a1d7f0c11:42"
THIRD = b"7a1b2c3d-0000-4000-8000-000000000003:9"


@pytest.fixture
def subs(r: redis.Redis) -> Iterator[dict[bytes, Any]]:
    """Channel -> its subscribed connection (a waiting thread), closed after."""
    made: dict[bytes, Any] = {}
    yield made
    for p in made.values():
        p.close()


def listen(client: redis.Redis, made: dict[bytes, Any], *channels: bytes) -> None:
    for channel in channels:
        p = client.pubsub()
        p.subscribe(channel)
        assert p.get_message(timeout=1)["type"] == "subscribe"
        made[channel] = p


def heard(made: dict[bytes, Any]) -> dict[bytes, list[bytes]]:
    """What each subscribed channel received."""
    out: dict[bytes, list[bytes]] = {}
    for channel, p in made.items():
        got = []
        while (msg := p.get_message(timeout=0.3)) is not None:
            if msg["type"] == "message":
                got.append(msg["data"])
        out[channel] = got
    return out


def plant(r: redis.Redis, queued: dict[bytes, int]) -> ApprovedLock:
    """A fair lock held by a dead owner (no TTL), `queued` thread -> its timeout's offset from
    now (ms; negative: passed), in queue order, as Redisson's tryAcquire writes them."""
    r.hset(LOCK, REDISSON_FIELD, b"1")
    now = server_ms(r)
    for thread, offset in queued.items():
        r.rpush(QUEUE, thread)
        r.zadd(TIMEOUTS, {thread: now + offset})
    return approve(r, LOCK, Layout.REDISSON)


def dumps(r: redis.Redis) -> tuple[object, ...]:
    return r.dump(QUEUE), r.dump(TIMEOUTS)


def thread_channel(thread: bytes) -> bytes:
    return CHANNEL + b":" + thread


def test_the_next_queued_thread_is_woken_on_its_own_channel(
    r: redis.Redis, subs: dict[bytes, Any]
) -> None:
    target = plant(r, {FIRST: 300_000, SECOND: 600_000})
    listen(r, subs, CHANNEL, thread_channel(FIRST), thread_channel(SECOND))
    before = dumps(r)
    res = Releaser(r).release(target)
    assert res.outcome is Outcome.RELEASED
    assert r.exists(LOCK) == 0
    assert heard(subs) == {
        CHANNEL: [b"0"],  # the plain unlock message, as before
        thread_channel(FIRST): [b"0"],  # the next queued thread
        thread_channel(SECOND): [],  # the rest wait their turn, as with Redisson's unlock
    }
    assert dumps(r) == before  # neither the queue nor its timeouts written
    assert res.wake[-1] == (
        "Redisson fair lock: published 0 on redisson_lock__channel:{lock:fair}:"
        f"{FIRST.decode()} (the next thread in its queue)"
    )


def finding(key: bytes = LOCK) -> Finding:
    """The scan's finding for the planted fair lock (what the evidence is read for)."""
    return Finding(
        key, "hash", Layout.REDISSON, Reason.INFINITE_TTL, b"", "", -1, 9_000.0, 0, 2, 0, None, 0
    )


@pytest.mark.parametrize(
    ("queued", "words"),
    [
        ({FIRST: 300_000, SECOND: 600_000}, "2 waiting · releasing wakes 1 waiter; 1 more"),
        ({FIRST: -1_000, SECOND: 600_000}, "2 waiting · releasing wakes 1 waiter; 1 more"),
        ({FIRST: -1_000, SECOND: -1}, "2 waiting · releasing wakes no one: 2 waiters retry"),
    ],
)
def test_the_evidence_says_whom_the_release_wakes_and_the_release_does_it(
    real_redis: redis.Redis, queued: dict[bytes, int], words: str
) -> None:
    """A fair queue of 2 threads and no subscriber on the lock's channel: the impact counts the
    queue's live head as woken (the words), and releasing sends `0` to exactly that thread."""
    target = plant(real_redis, queued)
    subs: dict[bytes, Any] = {}
    try:
        listen(real_redis, subs, *(thread_channel(t) for t in queued))
        before = dumps(real_redis)
        (impact,) = read(real_redis, [finding()])
        assert (impact.waiters, impact.woken) == (2, 1 if "wakes 1" in words else 0)
        assert impact_words(impact, Layout.REDISSON).startswith(words)
        assert dumps(real_redis) == before  # the evidence read wrote nothing
        assert Releaser(real_redis).release(target).outcome is Outcome.RELEASED
        live = [t for t, offset in queued.items() if offset > 0][:1]
        assert heard(subs) == {thread_channel(t): [b"0"] if t in live else [] for t in queued}
    finally:
        for sub in subs.values():
            sub.close()


def test_threads_whose_timeout_passed_are_skipped_not_dropped(
    r: redis.Redis, subs: dict[bytes, Any]
) -> None:
    target = plant(r, {FIRST: -1_000, SECOND: -1, THIRD: 60_000})
    listen(r, subs, *(thread_channel(t) for t in (FIRST, SECOND, THIRD)))
    before = dumps(r)
    Releaser(r).release(target)
    assert heard(subs) == {
        thread_channel(FIRST): [],
        thread_channel(SECOND): [],
        thread_channel(THIRD): [b"0"],
    }
    assert dumps(r) == before


def test_no_one_is_woken_when_every_queued_thread_timed_out(
    r: redis.Redis, subs: dict[bytes, Any]
) -> None:
    target = plant(r, {FIRST: -5_000})
    listen(r, subs, thread_channel(FIRST))
    res = Releaser(r).release(target)
    assert res.outcome is Outcome.RELEASED
    assert heard(subs) == {thread_channel(FIRST): []}
    assert not any("fair lock" in w for w in res.wake)


def test_a_lock_with_no_queue_gets_only_its_unlock_message(
    r: redis.Redis, subs: dict[bytes, Any]
) -> None:
    target = plant(r, {})
    listen(r, subs, CHANNEL)
    res = Releaser(r).release(target)
    assert heard(subs) == {CHANNEL: [b"0"]}
    assert len(res.wake) == 1
    assert r.exists(QUEUE, TIMEOUTS) == 0  # nothing made


def test_no_wake_up_when_nothing_was_deleted(r: redis.Redis, subs: dict[bytes, Any]) -> None:
    target = plant(r, {FIRST: 300_000})
    listen(r, subs, thread_channel(FIRST))
    r.hincrby(LOCK, REDISSON_FIELD, 1)  # the holder re-entered: not what was approved
    assert Releaser(r).release(target).outcome is Outcome.SKIPPED_REACQUIRED
    r.hset(LOCK, REDISSON_FIELD, b"1")
    r.pexpire(LOCK, 60_000)
    delayed = approve(r, LOCK, Layout.REDISSON)
    assert Releaser(r, grace_ms=1_000).release(delayed).outcome is Outcome.RELEASED  # lock-delay
    assert heard(subs) == {thread_channel(FIRST): []}


@pytest.mark.parametrize(
    ("name", "queue"),
    [
        (b"lock:fair", b"redisson_lock_queue:{lock:fair}"),
        (b"{tag}orders", b"redisson_lock_queue:{tag}orders"),
    ],
)
def test_the_queue_is_named_as_redisson_names_it(name: bytes, queue: bytes) -> None:
    keys = fair_keys(ApprovedLock(name, Layout.REDISSON, b"", -1, 0))
    assert keys is not None
    assert keys[0] == queue
    assert keys[1] == queue.replace(b"_queue", b"_timeout")
    assert fair_keys(ApprovedLock(name, Layout.REDISSON_RW, b"", -1, 0)) is None


def fair_wake_line() -> list[str]:
    """docs/acl.md's `ACL SETUSER` line for the fair-lock wake-up (its own code block)."""
    for block in re.findall(r"```[^\n]*\n(.*?)```", acl_page(), re.DOTALL):
        lines = [shlex.split(line) for line in block.splitlines() if line.strip()]
        if "redisson_lock_timeout" in block and len(lines) == 1:  # the evidence block has two
            return lines[0][2:]
    raise AssertionError("docs/acl.md has no block for the fair-lock wake-up")


@pytest.fixture(scope="module")
def acl_server() -> Iterator[RedisServer]:
    server = start_or_skip()
    yield server
    server.stop()


@pytest.mark.parametrize("granted", [True, False])
def test_the_doc_acl_line_allows_it_and_without_it_the_release_stands(
    acl_server: RedisServer, granted: bool
) -> None:
    admin = acl_server.client()
    admin.flushall()
    admin.execute_command("ACL", "SETUSER", *doc_acl()["lockguard"])
    if granted:
        admin.execute_command("ACL", "SETUSER", *fair_wake_line())
    guard = acl_server.client(username="lockguard", password=password("lockguard"))
    made: dict[bytes, Any] = {}
    try:
        target = plant(admin, {FIRST: 300_000})
        listen(admin, made, thread_channel(FIRST))
        res = Releaser(guard).release(target)
        assert res.outcome is Outcome.RELEASED
        assert admin.exists(LOCK) == 0
        assert heard(made) == {thread_channel(FIRST): [b"0"] if granted else []}
        assert any("fair lock" in w for w in res.wake) is granted
    finally:
        for p in made.values():
            p.close()
        guard.close()
        admin.close()


@pytest.mark.real
def test_on_a_cluster_the_next_queued_thread_is_woken_wherever_it_listens(
    cluster: EmbeddedCluster, rc: RedisCluster
) -> None:
    """The queue and its timeouts are read on their slot's primary; the PUBLISH reaches a
    subscriber connected to any primary (Redis Cluster forwards it to every node)."""
    rc.hset(LOCK, REDISSON_FIELD, b"1")
    now = server_ms(rc)
    rc.rpush(QUEUE, FIRST, SECOND)
    rc.zadd(TIMEOUTS, {FIRST: now - 1, SECOND: now + 300_000})  # FIRST timed out
    target = ApprovedLock(LOCK, Layout.REDISSON, encode_fields(((REDISSON_FIELD, b"1"),)), -1, now)
    made: dict[bytes, Any] = {}
    clients = [n.client() for n in cluster.primaries()]
    try:
        for c, thread in zip(clients, (FIRST, SECOND, SECOND), strict=False):
            p = c.pubsub()
            p.subscribe(thread_channel(thread))
            assert p.get_message(timeout=2) is not None
            made[thread_channel(thread) + b"@%d" % len(made)] = p
        before = rc.dump(QUEUE), rc.dump(TIMEOUTS)
        res = Releaser(rc).release(target)  # type: ignore[arg-type]
        assert res.outcome is Outcome.RELEASED
        got = heard(made)
        assert sorted(got.values()) == [[], [b"0"], [b"0"]]  # SECOND on two primaries, not FIRST
        assert all(msgs == [] for name, msgs in got.items() if FIRST in name)
        assert (rc.dump(QUEUE), rc.dump(TIMEOUTS)) == before
        assert "(the next thread in its queue)" in res.wake[-1]
    finally:
        for p in made.values():
            p.close()
        for c in clients:
            c.close()


@pytest.mark.real
def test_on_a_cluster_a_thread_listening_sharded_is_woken_too(
    cluster: EmbeddedCluster, rc: RedisCluster
) -> None:
    """Redisson on a cluster with sharded pub/sub: its queued thread SSUBSCRIBEs to its channel
    (on the channel's slot's primary); the wake-up reaches it once, and nothing is written."""
    rc.hset(LOCK, REDISSON_FIELD, b"1")
    now = server_ms(rc)
    rc.rpush(QUEUE, FIRST, SECOND)
    rc.zadd(TIMEOUTS, {FIRST: now + 300_000, SECOND: now + 600_000})
    target = ApprovedLock(LOCK, Layout.REDISSON, encode_fields(((REDISSON_FIELD, b"1"),)), -1, now)
    port = rc.get_node_from_key(thread_channel(FIRST)).port
    home = next(n for n in cluster.primaries() if n.port == port).client()
    subs = {t: home.pubsub() for t in (FIRST, SECOND)}
    try:
        for thread, p in subs.items():
            p.ssubscribe(thread_channel(thread))
            assert p.get_sharded_message(timeout=2) is not None
        before = rc.dump(QUEUE), rc.dump(TIMEOUTS)
        res = Releaser(rc).release(target)  # type: ignore[arg-type]
        assert res.outcome is Outcome.RELEASED
        got = {}
        for thread, p in subs.items():
            msgs = []
            while (msg := p.get_sharded_message(timeout=0.3)) is not None:
                if msg["type"] == "smessage":
                    msgs.append(msg["data"])
            got[thread] = msgs
        assert got == {FIRST: [b"0"], SECOND: []}
        assert (rc.dump(QUEUE), rc.dump(TIMEOUTS)) == before
    finally:
        for p in subs.values():
            p.close()
        home.close()
