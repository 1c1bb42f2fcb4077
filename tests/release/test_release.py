"""Release: compare-and-delete on the approved bytes, lock-delay, verification, waiter wake-up.

Redis behaviour runs on both backends (`r`); the library wake-ups with real child processes run on
the real server only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from bot.core.display import escape
from bot.core.layouts import COUNTER_IDENTITY, encode_fields
from bot.core.model import Layout, Reason
from bot.release import ApprovedLock, Outcome, Recording, Releaser, Result
from tests.conftest import RedisServer, free_port

REDISSON_FIELD = b"6f1c2c1e-6f3a-4a5b-9c1d-2b3c4d5e6f70:1"
OTHER_FIELD = b"0a1b2c3d-0000-4000-8000-000000000001:7"


def server_ms(client: redis.Redis) -> int:
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


def approve(
    client: redis.Redis,
    key: bytes,
    layout: Layout,
    identity: bytes | None = None,
    counter: int | None = None,
    reason: Reason | None = None,
) -> ApprovedLock:
    """The ApprovedLock a scan would have produced from the key as it is now (a hash's identity:
    every field and value it holds now)."""
    if identity is None:
        identity = encode_fields(tuple(client.hgetall(key).items()))
    return ApprovedLock(
        key, layout, identity, int(client.pttl(key)), server_ms(client), counter, reason
    )


def fields(*pairs: tuple[bytes, object]) -> bytes:
    return encode_fields(tuple((f, str(v).encode()) for f, v in pairs))


def state(client: redis.Redis, key: bytes) -> tuple[object, ...]:
    """Everything a release could change, exactly: type, dumped value, absolute expiry."""
    return client.type(key), client.dump(key), client.pexpiretime(key)


# -- string token locks ---------------------------------------------------------------------------


def test_string_released_when_token_matches(r: redis.Redis) -> None:
    r.set(b"lock:a", b"tok-1", px=60_000)
    target = approve(r, b"lock:a", Layout.STRING, b"tok-1")
    res = Releaser(r).release(target)
    assert res.outcome is Outcome.RELEASED
    assert r.exists(b"lock:a") == 0
    assert Releaser(r).verifier.verify(target, res) == res


def test_string_skipped_and_untouched_when_reacquired(r: redis.Redis) -> None:
    r.set(b"lock:a", b"old-token", px=60_000)
    target = approve(r, b"lock:a", Layout.STRING, b"old-token")
    r.set(b"lock:a", b"new-token", px=45_000)  # expired and re-acquired since the scan
    before = state(r, b"lock:a")
    for grace in (None, 1000):
        res = Releaser(r, grace_ms=grace).release(target)
        assert res.outcome is Outcome.SKIPPED_REACQUIRED
        assert "re-acquired" in res.detail
        assert "new-token" not in res.detail
        assert "old-token" not in res.detail
        assert state(r, b"lock:a") == before


def test_string_already_gone(r: redis.Redis) -> None:
    target = ApprovedLock(b"lock:gone", Layout.REDIS_PY, b"a" * 32, 5000, server_ms(r))
    res = Releaser(r).release(target)
    assert res.outcome is Outcome.ALREADY_GONE
    assert Releaser(r).verifier.verify(target, res) == res  # only RELEASED results are checked


def test_string_recovered_when_ttl_rearmed_since_approval(r: redis.Redis) -> None:
    r.set(b"lock:a", b"tok", px=2_000)
    target = approve(r, b"lock:a", Layout.STRING, b"tok")
    r.pexpire(b"lock:a", 60_000)  # the owner is renewing again
    before = state(r, b"lock:a")
    res = Releaser(r).release(target)
    assert res.outcome is Outcome.RECOVERED
    assert "renewed" in res.detail
    assert state(r, b"lock:a") == before


def test_string_recovered_when_expiry_appears_on_infinite_lock(r: redis.Redis) -> None:
    r.set(b"lock:a", b"tok")
    target = approve(r, b"lock:a", Layout.STRING, b"tok")
    assert target.ttl_ms == -1
    r.pexpire(b"lock:a", 30_000)
    before = state(r, b"lock:a")
    res = Releaser(r).release(target)
    assert res.outcome is Outcome.RECOVERED
    assert "expiry" in res.detail
    assert state(r, b"lock:a") == before


def test_natural_countdown_is_not_recovery(r: redis.Redis) -> None:
    """A reading taken a while ago with the TTL running down as predicted is still releasable."""
    r.set(b"lock:a", b"tok", px=10_000)
    now = server_ms(r)
    target = ApprovedLock(
        b"lock:a", Layout.STRING, b"tok", int(r.pttl(b"lock:a")) + 3_000, now - 3_000
    )
    assert Releaser(r).release(target).outcome is Outcome.RELEASED


def test_binary_key_and_value_compared_on_exact_bytes(r: redis.Redis) -> None:
    key = b"lock:\x00\xff\n\\x\xe2\x82"
    value = b"\x00\x01\xfe\xff\r\n"
    r.set(key, value)
    rel = Releaser(r)
    near = approve(r, key, Layout.STRING, value[:-1] + b"\x00")
    assert rel.release(near).outcome is Outcome.SKIPPED_REACQUIRED
    assert r.get(key) == value
    assert rel.release(approve(r, key, Layout.STRING, value)).outcome is Outcome.RELEASED
    assert r.exists(key) == 0


def test_wrong_type_is_skipped(r: redis.Redis) -> None:
    r.hset(b"lock:a", b"f", b"1")
    res = Releaser(r).release(ApprovedLock(b"lock:a", Layout.STRING, b"tok", -1, server_ms(r)))
    assert res.outcome is Outcome.SKIPPED_REACQUIRED
    assert r.hget(b"lock:a", b"f") == b"1"


def test_python_redis_lock_release_pushes_its_signal(r: redis.Redis) -> None:
    r.set(b"lock:job", b"QUJDREVGR0hJSktMTU5PUFFS")
    target = approve(r, b"lock:job", Layout.PYTHON_REDIS_LOCK, b"QUJDREVGR0hJSktMTU5PUFFS")
    rel = Releaser(r)
    res = rel.release(target)
    assert res.outcome is Outcome.RELEASED
    # Pushed in the same script as the delete, exactly as the library's own UNLOCK_SCRIPT does.
    assert r.lrange(b"lock-signal:job", 0, -1) == [b"1"]
    assert 0 < r.pttl(b"lock-signal:job") <= 1000
    assert res.wake == (
        "python-redis-lock: pushed one wake-up onto lock-signal:job (one blocked waiter retries)",
    )


@pytest.mark.parametrize(
    ("kind", "make"),
    [
        ("string", lambda r: r.set(b"lock-signal:job", b"someone else's")),
        ("hash", lambda r: r.hset(b"lock-signal:job", b"f", b"v")),
    ],
)
def test_a_key_of_another_type_where_the_signal_list_goes_is_left_alone(
    r: redis.Redis, kind: str, make: Any
) -> None:
    """`lock-signal:NAME` holding anything but a list is not python-redis-lock's: the release
    of `lock:NAME` deletes the lock and neither deletes nor changes that key."""
    make(r)
    before = r.dump(b"lock-signal:job")
    r.set(b"lock:job", b"host-1234")
    target = approve(r, b"lock:job", Layout.PYTHON_REDIS_LOCK, b"host-1234")
    assert Releaser(r).release(target).outcome is Outcome.RELEASED
    assert r.exists(b"lock:job") == 0
    assert r.type(b"lock-signal:job") == kind.encode()
    assert r.dump(b"lock-signal:job") == before
    assert r.pttl(b"lock-signal:job") == -1


# -- Redisson-style hashes ------------------------------------------------------------------------


def test_redisson_hash_released_whole_key(r: redis.Redis) -> None:
    r.hset(b"orders", REDISSON_FIELD, 3)  # three reentrant holds of a dead owner
    r.pexpire(b"orders", 30_000)
    target = approve(r, b"orders", Layout.REDISSON)
    res = Releaser(r).release(target)
    assert res.outcome is Outcome.RELEASED
    assert r.exists(b"orders") == 0


def test_redisson_hash_skipped_when_its_holder_reentered(r: redis.Redis) -> None:
    """HINCRBY on the approved holder between scan and approval: activity, never deleted."""
    r.hset(b"orders", REDISSON_FIELD, 1)
    r.pexpire(b"orders", 30_000)
    target = approve(r, b"orders", Layout.REDISSON)
    r.hincrby(b"orders", REDISSON_FIELD, 1)
    before = state(r, b"orders")
    res = Releaser(r).release(target)
    assert res.outcome is Outcome.SKIPPED_REACQUIRED
    assert state(r, b"orders") == before


def test_redisson_hash_skipped_when_another_holder_has_it(r: redis.Redis) -> None:
    r.hset(b"orders", OTHER_FIELD, 1)
    r.pexpire(b"orders", 30_000)
    target = ApprovedLock(
        b"orders", Layout.REDISSON, fields((REDISSON_FIELD, 1)), 30_000, server_ms(r)
    )
    before = state(r, b"orders")
    res = Releaser(r).release(target)
    assert res.outcome is Outcome.SKIPPED_REACQUIRED
    assert state(r, b"orders") == before


def test_redisson_hash_skipped_when_a_new_holder_joined(r: redis.Redis) -> None:
    r.hset(b"orders", mapping={b"mode": b"read", REDISSON_FIELD: 1})
    target = approve(r, b"orders", Layout.REDISSON_RW)
    r.hset(b"orders", OTHER_FIELD, 1)  # a second reader
    res = Releaser(r).release(target)
    assert res.outcome is Outcome.SKIPPED_REACQUIRED
    assert "joined" in res.detail
    assert r.hlen(b"orders") == 3


def test_redisson_rw_lock_released_with_mode_field(r: redis.Redis) -> None:
    holders = sorted([REDISSON_FIELD, OTHER_FIELD])
    r.hset(b"rw", mapping={b"mode": b"read", holders[0]: 1, holders[1]: 2})
    target = approve(r, b"rw", Layout.REDISSON_RW)
    assert Releaser(r).release(target).outcome is Outcome.RELEASED
    assert r.exists(b"rw") == 0


def test_redisson_watchdog_renewal_is_recovery(r: redis.Redis) -> None:
    r.hset(b"orders", REDISSON_FIELD, 1)
    r.pexpire(b"orders", 1_000)
    target = approve(r, b"orders", Layout.REDISSON)
    r.pexpire(b"orders", 30_000)  # the watchdog renewed it: the owner is alive
    assert Releaser(r).release(target).outcome is Outcome.RECOVERED
    assert r.exists(b"orders") == 1


# -- counter locks --------------------------------------------------------------------------------

COUNTER_KEY = b"\x17" + (0x0102030405067B7D).to_bytes(8, "big")  # includes `{` and `}` bytes


def test_counter_kept_alive_by_contenders_released_while_they_count(r: redis.Redis) -> None:
    for _ in range(5):
        r.incr(COUNTER_KEY)
        r.expire(COUNTER_KEY, 2)
    target = approve(
        r,
        COUNTER_KEY,
        Layout.COUNTER,
        COUNTER_IDENTITY,
        counter=5,
        reason=Reason.KEPT_ALIVE_BY_CONTENDERS,
    )
    for _ in range(2):  # contenders keep trying, each re-arming the TTL: expected, not recovery
        r.incr(COUNTER_KEY)
        r.expire(COUNTER_KEY, 300)
    res = Releaser(r).release(target)
    assert res.outcome is Outcome.RELEASED
    assert r.exists(COUNTER_KEY) == 0


def test_counter_skipped_after_delete_and_fresh_incr(r: redis.Redis) -> None:
    r.set(COUNTER_KEY, 5, ex=300)
    target = approve(r, COUNTER_KEY, Layout.COUNTER, COUNTER_IDENTITY, counter=5)
    r.delete(COUNTER_KEY)
    r.incr(COUNTER_KEY)  # a new holder took it
    r.expire(COUNTER_KEY, 300)
    before = state(r, COUNTER_KEY)
    res = Releaser(r).release(target)
    assert res.outcome is Outcome.SKIPPED_REACQUIRED
    assert "count is 1, below the approved 5" in res.detail
    assert state(r, COUNTER_KEY) == before


@pytest.mark.parametrize("reason", [Reason.STALE_LEASE, Reason.KEPT_ALIVE_BY_CONTENDERS])
def test_counter_recreated_at_the_same_count_is_skipped(r: redis.Redis, reason: Reason) -> None:
    """INCR+EXPIRE, approved; DEL, INCR, EXPIRE by a new owner gives the same 1 with a fresh
    TTL: never the approved holder."""
    r.incr(COUNTER_KEY)
    r.expire(COUNTER_KEY, 600)
    target = ApprovedLock(
        COUNTER_KEY,
        Layout.COUNTER,
        COUNTER_IDENTITY,
        590_000,
        server_ms(r) - 5_000,
        counter=1,
        reason=reason,
    )  # seen 5 s ago with 595 s
    r.delete(COUNTER_KEY)
    r.incr(COUNTER_KEY)
    r.expire(COUNTER_KEY, 600)
    before = state(r, COUNTER_KEY)
    res = Releaser(r).release(target)
    assert res.outcome is Outcome.SKIPPED_REACQUIRED
    assert "re-armed" in res.detail
    assert state(r, COUNTER_KEY) == before


def test_stale_counter_that_grew_is_skipped(r: redis.Redis) -> None:
    r.set(COUNTER_KEY, 3, ex=300)
    target = approve(
        r, COUNTER_KEY, Layout.COUNTER, COUNTER_IDENTITY, counter=3, reason=Reason.STALE_LEASE
    )
    r.incr(COUNTER_KEY)
    res = Releaser(r).release(target)
    assert res.outcome is Outcome.SKIPPED_REACQUIRED
    assert "grew to 4" in res.detail
    assert r.get(COUNTER_KEY) == b"4"


def test_counter_skipped_when_no_longer_an_integer(r: redis.Redis) -> None:
    r.set(COUNTER_KEY, b"tok")
    res = Releaser(r).release(
        ApprovedLock(COUNTER_KEY, Layout.COUNTER, COUNTER_IDENTITY, -1, server_ms(r), counter=1)
    )
    assert res.outcome is Outcome.SKIPPED_REACQUIRED
    assert r.get(COUNTER_KEY) == b"tok"


# -- layouts that are never released, errors ------------------------------------------------------


def test_other_layout_is_never_released(r: redis.Redis) -> None:
    r.rpush(b"lock:list", b"x")
    res = Releaser(r).release(ApprovedLock(b"lock:list", Layout.OTHER, b"", -1, server_ms(r)))
    assert res.outcome is Outcome.ERROR
    assert "layout not releasable" in res.detail
    assert r.llen(b"lock:list") == 1


def test_unreachable_redis_is_an_error_result_without_secrets() -> None:
    client = redis.Redis(
        host="127.0.0.1",
        port=free_port(),
        password="hunter2-secret",
        socket_connect_timeout=0.5,
        retry=Retry(NoBackoff(), 0),
    )
    rel = Releaser(client)
    targets = [
        ApprovedLock(b"lock:a", Layout.STRING, b"tok-secret", -1, 0),
        ApprovedLock(b"orders", Layout.REDISSON, fields((REDISSON_FIELD, 1)), -1, 0),
        ApprovedLock(COUNTER_KEY, Layout.COUNTER, COUNTER_IDENTITY, -1, 0, counter=1),
    ]
    results = [rel.release(t) for t in targets]  # one after another: none raises
    for res in results:
        assert res.outcome is Outcome.ERROR
        assert "unreachable" in res.detail
        assert "hunter2" not in res.detail
        assert "tok-secret" not in res.detail


@pytest.mark.real
def test_acl_refusal_is_an_error_result_and_the_next_lock_still_runs(
    real_redis: redis.Redis, redis_server: RedisServer
) -> None:
    real_redis.set(b"lock:a", b"tok")
    real_redis.acl_setuser(
        "nodel", enabled=True, passwords=["+pw-secret"], keys=["*"], commands=["+@all", "-del"]
    )
    try:
        limited = redis_server.client(username="nodel", password="pw-secret")
        rel = Releaser(limited)
        bad = rel.release(approve(real_redis, b"lock:a", Layout.STRING, b"tok"))
        assert bad.outcome is Outcome.ERROR
        assert "NOPERM" in bad.detail
        assert "pw-secret" not in bad.detail
        assert real_redis.get(b"lock:a") == b"tok"
        gone = rel.release(ApprovedLock(b"lock:c", Layout.STRING, b"x", -1, server_ms(real_redis)))
        assert gone.outcome is Outcome.ALREADY_GONE
        limited.close()
    finally:
        real_redis.acl_deluser("nodel")


def test_scripts_survive_script_flush(r: redis.Redis) -> None:
    rel = Releaser(r)
    r.set(b"lock:a", b"1x")
    assert rel.release(approve(r, b"lock:a", Layout.STRING, b"1x")).outcome is Outcome.RELEASED
    r.script_flush()
    r.set(b"lock:a", b"1x")
    assert rel.release(approve(r, b"lock:a", Layout.STRING, b"1x")).outcome is Outcome.RELEASED


def test_outcomes_are_enum_members_not_codes(r: redis.Redis) -> None:
    r.set(b"lock:a", b"tok")
    res = Releaser(r).release(approve(r, b"lock:a", Layout.STRING, b"tok"))
    assert type(res.outcome) is Outcome
    assert res.outcome == "released"


# -- lock-delay -----------------------------------------------------------------------------------


def test_lock_delay_shortens_ttl_keeps_value_and_verifies(r: redis.Redis) -> None:
    r.set(b"lock:a", b"tok")  # no expiry at all
    target = approve(r, b"lock:a", Layout.STRING, b"tok")
    rel = Releaser(r, grace_ms=5_000)
    res = rel.release(target)
    assert res.outcome is Outcome.RELEASED
    assert res.now_ttl_ms == 5_000
    assert r.get(b"lock:a") == b"tok"
    assert 0 < r.pttl(b"lock:a") <= 5_000
    assert rel.verifier.verify(target, res) == res
    assert res.wake == ()  # the key still exists: nobody to wake yet


def test_lock_delay_never_lengthens(r: redis.Redis) -> None:
    r.set(b"lock:a", b"tok", px=1_000)
    target = approve(r, b"lock:a", Layout.STRING, b"tok")
    before = state(r, b"lock:a")
    rel = Releaser(r, grace_ms=60_000)
    res = rel.release(target)
    assert res.outcome is Outcome.RELEASED
    assert res.now_ttl_ms is not None
    assert res.now_ttl_ms <= 1_000
    assert state(r, b"lock:a") == before
    assert rel.verifier.verify(target, res) == res


def test_lock_delay_on_hash_and_counter(r: redis.Redis) -> None:
    r.hset(b"orders", REDISSON_FIELD, 1)
    r.set(COUNTER_KEY, 7, ex=300)
    rel = Releaser(r, grace_ms=2_000)
    for target in (
        approve(r, b"orders", Layout.REDISSON),
        approve(r, COUNTER_KEY, Layout.COUNTER, COUNTER_IDENTITY, counter=7),
    ):
        res = rel.release(target)
        assert res.outcome is Outcome.RELEASED
        assert res.now_ttl_ms == 2_000
        assert 0 < r.pttl(target.key) <= 2_000
        assert rel.verifier.verify(target, res) == res


def test_lock_delay_verify_fails_when_the_ttl_is_back_above_grace(r: redis.Redis) -> None:
    r.set(b"lock:a", b"tok")
    target = approve(r, b"lock:a", Layout.STRING, b"tok")
    rel = Releaser(r, grace_ms=2_000)
    res = rel.release(target)
    r.pexpire(b"lock:a", 60_000)
    checked = rel.verifier.verify(target, res)
    assert checked.outcome is Outcome.ERROR
    assert checked.detail.startswith("verification failed:")


def test_grace_must_be_positive(r: redis.Redis) -> None:
    with pytest.raises(ValueError, match="grace_ms"):
        Releaser(r, grace_ms=0)


# -- verify ---------------------------------------------------------------------------------------


def test_verify_reports_a_new_holder_as_fine(r: redis.Redis) -> None:
    r.set(b"lock:a", b"old", px=30_000)
    target = approve(r, b"lock:a", Layout.STRING, b"old")
    rel = Releaser(r)
    res = rel.release(target)
    r.set(b"lock:a", b"new", px=30_000)  # someone acquired it right after
    checked = rel.verifier.verify(target, res)
    assert checked.outcome is Outcome.RELEASED
    assert "new holder" in checked.detail


def test_verify_fails_when_the_approved_holder_is_still_there(r: redis.Redis) -> None:
    r.set(b"lock:a", b"tok-q7z")
    target = approve(r, b"lock:a", Layout.STRING, b"tok-q7z")
    claimed = Result(b"lock:a", Outcome.RELEASED, "deleted")  # e.g. a delete lost in a failover
    checked = Releaser(r).verifier.verify(target, claimed)
    assert checked.outcome is Outcome.ERROR
    assert checked.detail.startswith("verification failed:")
    assert "q7z" not in checked.detail


# -- recording and announcing ---------------------------------------------------------------------

OUTS, CASE = b"t:case:outcomes", b"t:case"


def recording(channel: str = "locks:reclaimed") -> Recording:
    return Recording(OUTS, CASE, 0, channel, '{"key":"lock:a",')


def events(sub: redis.client.PubSub) -> list[dict[str, object]]:
    out = []
    while (msg := sub.get_message(timeout=0.3)) is not None:
        if msg["type"] == "message":
            out.append(json.loads(msg["data"]))
    return out


@pytest.mark.parametrize(("grace", "event"), [(None, "lock_released"), (2_000, "lock_delayed")])
def test_a_recorded_release_announces_once_and_a_rerun_is_decided_earlier(
    r: redis.Redis, grace: int | None, event: str
) -> None:
    r.set(b"lock:a", b"tok")
    target = approve(r, b"lock:a", Layout.STRING, b"tok")
    sub = r.pubsub()
    sub.subscribe("locks:reclaimed")
    assert sub.get_message(timeout=1)["type"] == "subscribe"
    rel = Releaser(r, grace_ms=grace)
    res = rel.release(target, recording())
    assert res.outcome is Outcome.RELEASED
    assert res.event_published
    assert not res.earlier
    name, _, body = r.hget(OUTS, b"0").partition(b"\n")
    assert name == b"released"
    assert json.loads(body)["event_published"] is True
    assert r.hget(CASE, "n_released") == b"1"
    (sent,) = events(sub)
    assert (sent["key"], sent["event"]) == ("lock:a", event)
    assert isinstance(sent["released_at_ms"], int)
    # A retried or resumed release: the recorded outcome stands, nothing is done or announced.
    r.set(b"lock:a", b"tok")
    before = state(r, b"lock:a")
    again = rel.release(target, recording())
    assert again == Result(
        b"lock:a", Outcome.RELEASED, "decided by an earlier run: released", earlier=True
    )
    assert rel.verifier.verify(target, again) == again
    assert state(r, b"lock:a") == before
    assert events(sub) == []
    assert r.hget(CASE, "n_released") == b"1"
    sub.close()


def test_a_recorded_skip_publishes_nothing(r: redis.Redis) -> None:
    r.set(b"lock:a", b"new-tok")
    res = Releaser(r).release(
        ApprovedLock(b"lock:a", Layout.STRING, b"tok", -1, server_ms(r)), recording()
    )
    assert res.outcome is Outcome.SKIPPED_REACQUIRED
    assert not res.event_published
    assert r.hget(OUTS, b"0").startswith(b"skipped_reacquired\n")


def test_no_channel_publishes_nothing_and_says_nothing_of_it(r: redis.Redis) -> None:
    r.set(b"lock:a", b"tok")
    res = Releaser(r).release(approve(r, b"lock:a", Layout.STRING, b"tok"), recording(""))
    assert res == Result(b"lock:a", Outcome.RELEASED, "deleted: the approved holder still held it")
    assert json.loads(r.hget(OUTS, b"0").partition(b"\n")[2])["event_published"] is False


# -- waking the libraries' own waiters ------------------------------------------------------------


def test_wake_waiters_nothing_for_polling_libraries(r: redis.Redis) -> None:
    target = ApprovedLock(b"lock:a", Layout.REDIS_PY, b"a" * 32, -1, 0)
    assert Releaser(r).wake_lines(target) == []


@pytest.mark.parametrize(
    ("layout", "key", "channel", "message"),
    [
        (Layout.REDISSON, b"orders", b"redisson_lock__channel:{orders}", b"0"),
        (Layout.REDISSON, b"{tag}orders", b"redisson_lock__channel:{tag}orders", b"0"),
        (Layout.REDISSON_RW, b"stock", b"redisson_rwlock:{stock}", b"1"),
    ],
)
def test_redisson_waiters_get_the_unlock_message(
    r: redis.Redis, layout: Layout, key: bytes, channel: bytes, message: bytes
) -> None:
    r.hset(key, REDISSON_FIELD, 1)
    if layout is Layout.REDISSON_RW:
        r.hset(key, b"mode", b"write")
    target = approve(r, key, layout)
    sub = r.pubsub()
    sub.subscribe(channel)
    assert sub.get_message(timeout=1)["type"] == "subscribe"
    rel = Releaser(r)
    res = rel.release(target)
    assert res.outcome is Outcome.RELEASED
    assert len(res.wake) == 1
    assert escape(channel) in res.wake[0]
    msg = sub.get_message(timeout=1)
    assert msg is not None
    assert msg["type"] == "message"
    assert (msg["channel"], msg["data"]) == (channel, message)
    sub.close()


_HOLDER = """
import sys, time, redis, redis_lock
conn = redis.Redis(port=int(sys.argv[1]))
lock = redis_lock.Lock(conn, "job")  # expire=None: the lock never expires
lock.acquire()
print("held", flush=True)
time.sleep(3600)
"""

_WAITER = """
import sys, redis, redis_lock
conn = redis.Redis(port=int(sys.argv[1]))
lock = redis_lock.Lock(conn, "job")
print("waiting", flush=True)
lock.acquire()  # no timeout, no expire: BLPOP lock-signal:job with timeout 0, forever
conn.set("waiter-acquired", lock.id)
print("acquired", flush=True)
"""


def _child(code: str, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), str(port)], stdout=subprocess.PIPE, text=True
    )


@pytest.mark.real
def test_python_redis_lock_waiter_wakes_after_release(
    real_redis: redis.Redis, redis_server: RedisServer
) -> None:
    holder = _child(_HOLDER, redis_server.port)
    waiter = None
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGKILL)  # the owner dies; its lock stays forever
        holder.wait(5)
        assert real_redis.pttl(b"lock:job") == -1
        token = real_redis.get(b"lock:job")
        assert token is not None

        waiter = _child(_WAITER, redis_server.port)
        assert waiter.stdout is not None
        assert waiter.stdout.readline().strip() == "waiting"
        deadline = time.monotonic() + 10
        while not any(c.get("cmd") == "blpop" for c in real_redis.client_list()):
            assert time.monotonic() < deadline, "the waiter never blocked on BLPOP"
            time.sleep(0.02)

        target = approve(real_redis, b"lock:job", Layout.PYTHON_REDIS_LOCK, token)
        rel = Releaser(real_redis)
        started = time.monotonic()
        res = rel.release(target)
        assert res.outcome is Outcome.RELEASED
        assert res.wake
        while real_redis.get(b"waiter-acquired") is None:
            assert time.monotonic() - started < 1.0, "the blocked waiter was not woken"
            time.sleep(0.01)
        assert real_redis.get(b"lock:job") == real_redis.get(b"waiter-acquired") != token
        assert waiter.wait(5) == 0
        assert rel.verifier.verify(target, res).outcome is Outcome.RELEASED
    finally:
        for proc in (holder, waiter):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(5)
            if proc is not None and proc.stdout is not None:
                proc.stdout.close()
