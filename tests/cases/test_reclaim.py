"""The reclaim flow end to end: scan -> case -> decision -> release -> verify -> events -> audit."""

from __future__ import annotations

import itertools
import json
import threading
import time

import pytest
import redis

from bot.cases import audit
from bot.cases.approval import approve
from bot.cases.case import Case, State
from bot.cases.case_store import CaseStore, manifest
from bot.cases.decision import reject
from bot.cases.opening import scan_and_propose
from bot.cases.reclaim_config import ReclaimConfig
from bot.core.clock import iso_utc
from bot.core.errors import CaseError
from bot.core.rules import Policy
from bot.scan.result import ScanOptions, ScanResult
from bot.store import keyspace

POLICY = Policy(stale_threshold_ms=1_000)
OPTS = ScanOptions(patterns=[b"lock:*", b"redisson:*", b"\x17*"], policy=POLICY)
PAST = 1.1  # seconds: two scans this far apart take a lease past the threshold
PATTERNS = tuple(OPTS.patterns)  # what the release is allowed to touch: what the scan covers
LIVE = ReclaimConfig(
    dry_run=False, release_channel="locks:reclaimed", policy=POLICY, patterns=PATTERNS
)
DRY = ReclaimConfig(
    dry_run=True, release_channel="locks:reclaimed", policy=POLICY, patterns=PATTERNS
)
COUNTER = b"\x17\x00\x00\x00\x00\x00\x00\x00\x07"
_MARKERS = itertools.count(1)


def dump(client: redis.Redis) -> dict[bytes, tuple[bytes | None, int]]:
    """Every lock key with its DUMP and absolute expiry: byte-for-byte state."""
    out = {}
    for key in client.scan_iter(match=b"*", count=1000):
        if not keyspace.is_own(key):
            out[key] = (client.dump(key), client.pexpiretime(key))
    return out


class Listener:
    def __init__(self, client: redis.Redis, channel: str = "locks:reclaimed") -> None:
        self.client = client
        self.channel = channel
        self.pubsub = client.pubsub(ignore_subscribe_messages=True)
        self.pubsub.subscribe(channel)
        self.pubsub.get_message(timeout=0.5)

    def rest(self, timeout: float = 30.0) -> list[dict[str, object]]:
        """Every event published before now and not read yet, and none after: a marker is
        published now on the channel, and read for. Redis runs PUBLISHes one at a time and hands
        a subscriber one channel's messages in that order, so the marker's arrival (a positive
        signal) says that nothing published before it is still on its way."""
        marker = f"lockguard-test-marker-{next(_MARKERS)}".encode()
        self.client.publish(self.channel, marker)
        events = []
        deadline = time.monotonic() + timeout
        while True:
            msg = self.pubsub.get_message(timeout=0.05)
            if msg and msg["type"] == "message":
                if msg["data"] == marker:
                    return events
                events.append(json.loads(msg["data"]))
            assert time.monotonic() < deadline, f"the marker never came back; got {events}"

    def drain(self, wait: float = 0.3, until: int | None = None) -> list[dict[str, object]]:
        """The events received within `wait` s (or as soon as `until` of them have come)."""
        events = []
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and (until is None or len(events) < until):
            msg = self.pubsub.get_message(timeout=0.05)
            if msg and msg["type"] == "message":
                events.append(json.loads(msg["data"]))
        return events


def plant(r: redis.Redis) -> None:
    r.set(b"lock:no-ttl", b"b64tokenb64tokenb64token")
    r.hset(b"redisson:orders", b"0d6f9f9e-2b55-4b4e-9d3e-7b3a1d7f0c11:42", b"3")
    r.set(COUNTER, b"5", ex=600)


def propose(r: redis.Redis, cfg: ReclaimConfig) -> tuple[ScanResult, Case | None]:
    """Two scans past the threshold, as the schedule would run them: no lock is offered on
    first sight (a no-TTL lock seen once may have a live owner)."""
    _, first = scan_and_propose(r, OPTS, cfg)
    assert first is None
    time.sleep(PAST)
    return scan_and_propose(r, OPTS, cfg)


def test_approval_releases_each_layout_and_publishes_one_event_each(r: redis.Redis) -> None:
    plant(r)
    listener = Listener(r)
    _result, case = propose(r, LIVE)
    assert case is not None
    assert len(case.locks) == 3
    rep = approve(r, case.id, "ann", LIVE)
    assert rep.released == 3
    assert not r.exists(b"lock:no-ttl", b"redisson:orders", COUNTER)
    events = listener.rest()
    assert sorted(e["key_hex"] for e in events) == sorted(
        k.hex() for k in (b"lock:no-ttl", b"redisson:orders", COUNTER)
    )
    for e in events:
        assert e["event"] == "lock_released"
        assert e["case_id"] == case.id
        assert e["approved_by"] == "ann"
        assert e["reason"] == ("stale_lease" if e["key_hex"] == COUNTER.hex() else "infinite_ttl")
        assert e["released_at"] == iso_utc(e["released_at_ms"])
    stored = CaseStore(r, retention_ms=1).get(case.id)
    assert stored is not None
    assert stored.state is State.RELEASED
    assert [o["outcome"] for o in stored.outcomes] == ["released"] * 3


def test_lock_reacquired_since_the_scan_is_skipped_and_still_held(r: redis.Redis) -> None:
    r.set(b"lock:job", b"old-token")
    r.set(b"lock:other", b"dead-token")
    listener = Listener(r)
    _, case = propose(r, LIVE)
    assert case is not None
    r.set(b"lock:job", b"new-token", px=60_000)  # the old owner's lock lapsed; a new one took it
    rep = approve(r, case.id, "ann", LIVE)
    outcomes = {o.lock.key: o.outcome for o in rep.outcomes}
    assert outcomes == {b"lock:job": "skipped_reacquired", b"lock:other": "released"}
    assert r.get(b"lock:job") == b"new-token"
    assert 0 < r.pttl(b"lock:job") <= 60_000
    events = listener.rest()
    assert [e["key_hex"] for e in events] == [b"lock:other".hex()]  # none for the skipped one


def test_dry_run_changes_no_lock_byte_and_publishes_nothing(r: redis.Redis) -> None:
    plant(r)
    r.set(b"lock:ttl", b"x", px=500_000)
    listener = Listener(r)
    _, case = propose(r, DRY)
    assert case is not None
    before = dump(r)
    rep = approve(r, case.id, "ann", DRY)
    after = dump(r)
    assert {k: v[0] for k, v in after.items()} == {k: v[0] for k, v in before.items()}
    assert rep.dry_run
    assert {o.outcome for o in rep.outcomes} == {"dry_run"}
    assert listener.rest() == []


def test_expired_case_cannot_be_approved_and_nothing_changes(r: redis.Redis) -> None:
    plant(r)
    cfg = ReclaimConfig(dry_run=False, case_ttl_ms=1, policy=POLICY, patterns=PATTERNS)
    _, case = propose(r, cfg)
    assert case is not None
    time.sleep(0.01)
    before = dump(r)
    with pytest.raises(CaseError, match="expired"):
        approve(r, case.id, "ann", cfg)
    assert dump(r) == before


def test_rejected_case_cannot_then_be_approved(r: redis.Redis) -> None:
    plant(r)
    _, case = propose(r, LIVE)
    assert case is not None
    reject(r, case.id, "bob", "owner is only paused", LIVE)
    before = dump(r)
    with pytest.raises(CaseError, match=r"already decided \(rejected by bob"):
        approve(r, case.id, "ann", LIVE)
    assert dump(r) == before


def test_unknown_case_is_a_clear_error(r: redis.Redis) -> None:
    with pytest.raises(CaseError, match="no case LG-200101-abcdef"):
        approve(r, "LG-200101-abcdef", "ann", LIVE)


def test_every_step_is_in_the_audit_log(r: redis.Redis) -> None:
    plant(r)
    _, case = propose(r, LIVE)
    assert case is not None
    approve(r, case.id, "ann", LIVE)
    events = [e.event for e in reversed(audit.recent(r, 100))]
    assert events[:4] == ["scan", "scan", "case_opened", "decision"]  # no case on first sight
    assert events.count("release") == 3  # one entry per lock, saying it was verified
    assert "verification" not in events
    releases = [e for e in audit.recent(r, 100, case.id) if e.event == "release"]
    assert all(e.data["verified"] is True for e in releases)
    assert events[-1] == "case_closed"
    decision = next(e for e in audit.recent(r, 100, case.id) if e.event == "decision")
    assert decision.actor == "ann"
    assert manifest(r, case.id)["locks"] == 3  # type: ignore[index]


@pytest.mark.real
def test_two_concurrent_approvals_release_once(
    real_redis: redis.Redis, redis_server: object
) -> None:
    real_redis.set(b"lock:a", b"token-a")
    listener = Listener(real_redis)
    _, case = propose(real_redis, LIVE)
    assert case is not None
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def click(name: str) -> None:
        client = redis_server.client()  # type: ignore[attr-defined]
        barrier.wait()
        try:
            rep = approve(client, case.id, name, LIVE)
            outcomes.extend(o.outcome for o in rep.outcomes)
        except CaseError as exc:
            outcomes.append("already decided" if "already decided" in str(exc) else str(exc))

    threads = [threading.Thread(target=click, args=(n,)) for n in ("ann", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["already decided", "released"]
    assert len(listener.rest()) == 1


def test_lock_delay_shortens_ttls_but_counters_are_deleted(r: redis.Redis) -> None:
    r.set(b"lock:paused", b"maybe-paused-owner")
    r.set(COUNTER, b"5", ex=600)
    cfg = ReclaimConfig(dry_run=False, lock_delay_ms=5_000, policy=POLICY, patterns=PATTERNS)
    listener = Listener(r)
    _, case = propose(r, cfg)
    assert case is not None
    rep = approve(r, case.id, "ann", cfg)
    assert r.get(b"lock:paused") == b"maybe-paused-owner"
    assert 0 < r.pttl(b"lock:paused") <= 5_000
    assert not r.exists(COUNTER)
    assert {o.outcome for o in rep.outcomes} == {"released"}
    # Each is announced as what happened: the delayed one is still held, for 5 s at most.
    events = {e["key_hex"]: e for e in listener.rest()}
    assert events[COUNTER.hex()]["event"] == "lock_released"
    delayed = events[b"lock:paused".hex()]
    assert delayed["event"] == "lock_delayed"
    assert delayed["grace_ms"] == 5_000
    assert len(events) == 2


_HOLDER = """
import sys, time, redis, redis_lock
conn = redis.Redis(port=int(sys.argv[1]))
redis_lock.Lock(conn, "report").acquire()
print("held", flush=True)
time.sleep(600)
"""
_WAITER = """
import sys, redis, redis_lock
conn = redis.Redis(port=int(sys.argv[1]))
print("waiting", flush=True)
lock = redis_lock.Lock(conn, "report")
lock.acquire()  # no timeout and no expire: BLPOP on lock-signal:report forever
conn.set("waiter-acquired", lock.id)
"""


@pytest.mark.real
def test_killed_owners_lock_is_reclaimed_and_a_blocked_waiter_gets_it_within_a_second(
    real_redis: redis.Redis, redis_server: object
) -> None:
    import os
    import signal
    import subprocess
    import sys

    port = str(redis_server.port)  # type: ignore[attr-defined]
    procs = []
    try:
        holder = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, port], stdout=subprocess.PIPE, text=True
        )
        procs.append(holder)
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(5)
        waiter = subprocess.Popen(
            [sys.executable, "-c", _WAITER, port], stdout=subprocess.PIPE, text=True
        )
        procs.append(waiter)
        assert waiter.stdout is not None
        assert waiter.stdout.readline().strip() == "waiting"
        deadline = time.monotonic() + 10
        while not any(c.get("cmd") == "blpop" for c in real_redis.client_list()):
            assert time.monotonic() < deadline, "the waiter never blocked"
            time.sleep(0.02)

        listener = Listener(real_redis)
        result, case = propose(real_redis, LIVE)
        assert [f.layout.value for f in result.worst] == ["python_redis_lock"]
        assert case is not None
        started = time.monotonic()
        rep = approve(real_redis, case.id, "ann", LIVE)
        assert [o.outcome for o in rep.outcomes] == ["released"]
        while real_redis.get(b"waiter-acquired") is None:
            assert time.monotonic() - started < 1.0, "the blocked waiter was not woken in 1 s"
            time.sleep(0.01)
        assert waiter.wait(5) == 0
        assert [e["key"] for e in listener.rest()] == ["lock:report"]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
            if p.stdout is not None:
                p.stdout.close()


def test_a_release_cut_short_can_be_resumed_and_releases_each_lock_once(
    r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.release import Releaser

    plant(r)
    listener = Listener(r)
    _, case = propose(r, LIVE)
    assert case is not None
    real_release = Releaser.release_many

    def dies_after_first(self: Releaser, items: list) -> object:  # type: ignore[type-arg]
        real_release(self, items[:1])  # the first lock's script ran: deleted, announced
        raise KeyboardInterrupt  # and the approver's process is killed before the reply

    monkeypatch.setattr(Releaser, "release_many", dies_after_first)
    with pytest.raises(KeyboardInterrupt):
        approve(r, case.id, "ann", LIVE)
    monkeypatch.setattr(Releaser, "release_many", real_release)
    with pytest.raises(CaseError, match="--resume"):
        approve(r, case.id, "bob", LIVE)
    rep = approve(r, case.id, "bob", LIVE, resume=True)
    # The first run's release is recorded as what it was, never re-labelled already_gone.
    assert sorted(o.outcome for o in rep.outcomes) == ["released"] * 3
    assert not r.exists(b"lock:no-ttl", b"redisson:orders", COUNTER)
    events = listener.rest()
    assert sorted(e["key_hex"] for e in events) == sorted(
        k.hex() for k in (b"lock:no-ttl", b"redisson:orders", COUNTER)
    )  # once each
    assert {e["approved_by"] for e in events} == {"ann"}
    with pytest.raises(CaseError, match="no unfinished release"):
        approve(r, case.id, "bob", LIVE, resume=True)


def test_a_hash_too_big_to_read_whole_is_reported_but_never_put_in_a_case(r: redis.Redis) -> None:
    r.hset(
        b"redisson:big",
        mapping={f"0d6f9f9e-2b55-4b4e-9d3e-7b3a1d7f0c11:{i}".encode(): b"1" for i in range(300)},
    )
    result, case = scan_and_propose(r, OPTS, LIVE)
    time.sleep(PAST)
    result, case = scan_and_propose(r, OPTS, LIVE)
    assert [f.reason.value for f in result.worst] == ["infinite_ttl"]
    assert not result.worst[0].releasable
    assert "cannot all be proven" in result.worst[0].note
    assert case is None
