"""The audit engine end to end, on fakeredis and on a real redis-server (`r`): scans a few
hundred milliseconds apart, below and past a ~1 s stale threshold, as an operator would see them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
import redis

from bot.core.layouts import COUNTER_IDENTITY, encode_fields
from bot.core.model import Finding, Layout, Reason
from bot.core.rules import Policy
from bot.scan import MAX_VALUE_BYTES, ReadMode
from bot.scan.loop import run_scan
from bot.scan.result import ScanOptions, ScanResult
from bot.store import keyspace, scans

THRESHOLD_MS = 1000
PAST = 1.2  # seconds: sleeping this long takes a lease past THRESHOLD_MS
BELOW = 0.3  # seconds: well below the threshold

REDISSON_FIELD = b"6f1c2c1e-6f3a-4a5b-9c1d-2b3c4d5e6f70:1"
STALWART_KEY = b"\x17\x00\x00\x00\x00\x00\x00\x00\x07"


def scan(
    client: redis.Redis,
    patterns: Sequence[bytes] = (b"lock:*", b"app:*"),
    mode: ReadMode = ReadMode.AUTO,
    threshold_ms: int = THRESHOLD_MS,
    flag_infinite_ttl: bool = True,
    count: int = 1000,
    loose: bool = False,
) -> tuple[ScanResult, dict[bytes, Finding]]:
    """One scan; every key it saw (healthy locks and not-a-lock keys included), by exact key."""
    policy = Policy(
        stale_threshold_ms=threshold_ms,
        flag_infinite_ttl=flag_infinite_ttl,
        loose_recognition=loose,
    )
    reported: list[Finding] = []
    result = run_scan(
        client,
        ScanOptions(list(patterns), policy, scan_count=count, mode=mode),
        on_finding=reported.append,
        keep=10_000,
    )
    seen = {f.key: f for f in result.worst}
    assert len(seen) == result.scanned == len(result.worst)
    # What the callback saw is exactly the non-healthy locks: never a key that is no lock.
    assert sorted(f.key for f in reported) == sorted(
        k for k, f in seen.items() if f.reason not in (Reason.HEALTHY, Reason.NOT_A_LOCK)
    )
    return result, seen


def verdicts(client: redis.Redis, **kw: object) -> dict[bytes, Reason]:
    return {k: f.reason for k, f in scan(client, **kw)[1].items()}  # type: ignore[arg-type]


def test_lock_without_ttl_is_infinite_ttl_on_first_scan(r: redis.Redis) -> None:
    r.set(b"lock:forever", b"tok")
    result, seen = scan(r)
    f = seen[b"lock:forever"]
    assert f.reason is Reason.INFINITE_TTL
    assert f.ttl_ms == -1
    assert f.observations == 1
    assert f.identity == b"tok"
    assert result.findings == 1


def test_infinite_ttl_flag_off_ages_instead(r: redis.Redis) -> None:
    r.set(b"lock:forever", b"tok")
    assert verdicts(r, flag_infinite_ttl=False)[b"lock:forever"] is Reason.HEALTHY
    time.sleep(PAST)
    assert verdicts(r, flag_infinite_ttl=False)[b"lock:forever"] is Reason.STALE_LEASE


def test_unrenewed_lock_with_long_ttl_goes_stale_after_the_threshold(r: redis.Redis) -> None:
    """A token lock of no library lockguard knows (its holder renews only when its code says
    so): stale once held past the threshold with no re-arm seen."""
    r.set(b"app:job", b"tok", px=60_000)
    _, first = scan(r)
    assert first[b"app:job"].reason is Reason.HEALTHY
    time.sleep(BELOW)
    _, second = scan(r)
    assert second[b"app:job"].reason is Reason.HEALTHY
    assert second[b"app:job"].observations == 2
    time.sleep(PAST - BELOW + 0.1)
    result, third = scan(r)
    f = third[b"app:job"]
    assert f.reason is Reason.STALE_LEASE
    assert f.renewal.startswith("lockguard does not know which library made this lock")
    assert 0 < f.ttl_ms < 60_000  # stale long before its TTL would free it
    assert f.held_seconds >= THRESHOLD_MS / 1000
    assert f.observations == 3
    assert f.rearms == 0
    assert f.releasable
    assert result.findings == 1


def test_a_lock_whose_library_renews_is_stale_only_once_its_renewal_is_overdue(
    r: redis.Redis,
) -> None:
    """`lock:NAME` is python-redis-lock's naming (here with its own id): it renews at 2/3 of
    its lease, so a live holder's TTL never falls under 1/3. Held past the threshold with 60 s
    left it is reported, not offered; once its TTL is under 17 s with no renewal (the PEXPIRE
    stands for 43 s passing) the renewal is overdue: stale, offered, and saying so."""
    r.set(b"lock:job", b"host-1:4242", px=60_000)
    scan(r)
    time.sleep(PAST)
    f = scan(r)[1][b"lock:job"]
    assert (f.layout, f.reason, f.releasable) == (
        Layout.PYTHON_REDIS_LOCK,
        Reason.LONG_HELD_RENEWING,
        False,
    )
    assert f.renewal.startswith("renewal not due yet (python-redis-lock renews at 2/3")
    r.pexpire(b"lock:job", 16_000)
    f = scan(r)[1][b"lock:job"]
    assert (f.reason, f.releasable, f.rearms) == (Reason.STALE_LEASE, True, 0)
    assert f.renewal.startswith("a live holder would have renewed by ")


def test_lock_reacquired_with_a_new_token_restarts_its_lease(r: redis.Redis) -> None:
    r.set(b"app:job", b"token-1", px=60_000)
    r.set(b"app:other", b"token-x", px=60_000)
    scan(r)
    time.sleep(PAST)
    r.set(b"app:job", b"token-2", px=60_000)  # released and taken by someone else
    _, seen = scan(r)
    job = seen[b"app:job"]
    assert job.reason is Reason.HEALTHY
    assert job.identity == b"token-2"
    assert job.observations == 1
    assert job.held_seconds < PAST / 2
    assert seen[b"app:other"].reason is Reason.STALE_LEASE  # the control: same age, same token


def test_lock_whose_owner_renews_is_long_held_renewing_never_stale(r: redis.Redis) -> None:
    r.set(b"lock:renewed", b"tok", px=5_000)
    history = [scan(r)[1][b"lock:renewed"]]
    time.sleep(PAST)
    r.pexpire(b"lock:renewed", 5_000)  # the owner's renewal
    history.append(scan(r)[1][b"lock:renewed"])
    time.sleep(BELOW)  # between two renewals
    history.append(scan(r)[1][b"lock:renewed"])
    assert [f.reason for f in history] == [
        Reason.HEALTHY,
        Reason.LONG_HELD_RENEWING,
        Reason.LONG_HELD_RENEWING,
    ]
    assert history[-1].rearms == 1
    assert not history[-1].releasable


def test_counter_lock_kept_alive_by_contenders(r: redis.Redis) -> None:
    def contend(key: bytes) -> int:
        """One Stalwart 0.12 try_lock: MULTI INCR; EXPIRE; EXEC. Acquired iff the count is 1."""
        with r.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, 10)
            count, _ = pipe.execute()
        return int(count)

    assert contend(STALWART_KEY) == 1  # the worker that then died
    assert contend(b"\x17\x01") == 1  # a lock nobody else wants
    patterns = [b"\x17*"]
    _, first = scan(r, patterns=patterns)
    assert first[STALWART_KEY].reason is Reason.HEALTHY
    assert first[STALWART_KEY].layout is Layout.COUNTER
    time.sleep(PAST / 2)
    assert contend(STALWART_KEY) == 2  # failed attempts re-arm the TTL
    time.sleep(PAST / 2)
    assert contend(STALWART_KEY) == 3
    _, second = scan(r, patterns=patterns)
    f = second[STALWART_KEY]
    assert f.key == STALWART_KEY
    assert f.reason is Reason.KEPT_ALIVE_BY_CONTENDERS
    assert f.counter == 3
    assert f.identity == COUNTER_IDENTITY
    assert f.ttl_ms > 9_000  # freshly re-armed: it would never expire on its own
    assert f.releasable
    assert second[b"\x17\x01"].reason is Reason.STALE_LEASE


def test_counter_deleted_and_taken_again_is_a_new_lease(r: redis.Redis) -> None:
    r.set(STALWART_KEY, b"5", ex=60)
    scan(r, patterns=[b"\x17*"])
    time.sleep(PAST)
    r.delete(STALWART_KEY)
    r.incr(STALWART_KEY)
    r.expire(STALWART_KEY, 60)
    f = scan(r, patterns=[b"\x17*"])[1][STALWART_KEY]
    assert f.reason is Reason.HEALTHY
    assert f.observations == 1


def test_hashes_and_other_types_do_not_crash_the_scan(r: redis.Redis) -> None:
    r.hset(b"lock:redisson", REDISSON_FIELD, b"2")
    r.pexpire(b"lock:redisson", 30_000)
    r.hset(b"lock:rw", mapping={b"mode": b"read", REDISSON_FIELD: b"1"})
    r.pexpire(b"lock:rw", 30_000)
    r.hset(b"lock:bighash", mapping={f"f{i}".encode(): b"v" for i in range(300)})
    r.rpush(b"lock-signal:x", b"1")
    r.rpush(b"lock:list", b"1")
    r.zadd(b"lock:sem", {b"member": 1.0})
    r.sadd(b"lock:set", b"m")
    r.set(b"lock:plain", b"tok", px=30_000)
    _, seen = scan(r)
    assert {k: f.layout for k, f in seen.items()} == {
        b"lock:redisson": Layout.REDISSON,
        b"lock:rw": Layout.REDISSON_RW,
        b"lock:bighash": Layout.HASH,
        b"lock:list": Layout.OTHER,
        b"lock:sem": Layout.OTHER,
        b"lock:set": Layout.OTHER,
        b"lock:plain": Layout.PYTHON_REDIS_LOCK,  # a token under lock: is its naming
    }
    redisson = seen[b"lock:redisson"]
    assert redisson.identity == encode_fields(((REDISSON_FIELD, b"2"),))
    assert redisson.type == "hash"
    assert "thread 1" in redisson.owner
    assert redisson.reason is Reason.HEALTHY
    assert (REDISSON_FIELD, b"2") in redisson.fields
    assert len(seen[b"lock:bighash"].fields) <= 32
    for key in (b"lock:list", b"lock:sem", b"lock:set", b"lock:bighash"):
        assert seen[key].reason is Reason.NOT_A_LOCK  # counted and shown, never flagged
        assert not seen[key].releasable
        assert seen[key].note
    # Past the threshold with 30 s left: the watchdog renews at 1/3 of the lease (PTTL 20 s),
    # not due yet. Under 18.5 s with no renewal (the PEXPIRE stands for time passing): stale.
    time.sleep(PAST)
    assert verdicts(r)[b"lock:redisson"] is Reason.LONG_HELD_RENEWING
    r.pexpire(b"lock:redisson", 18_000)
    assert verdicts(r)[b"lock:redisson"] is Reason.STALE_LEASE


def tenure_table_keys(client: redis.Redis) -> set[bytes]:
    gen = int(client.get(keyspace.TENURE_GEN) or 0)
    return set(client.hkeys(keyspace.tenure_table(gen)))


def test_tenure_records_of_vanished_locks_are_dropped(r: redis.Redis) -> None:
    r.set(b"lock:a", b"1tok")
    r.set(b"lock:b", b"2tok")
    r.set(b"lock:short", b"3tok", px=100)
    scan(r)
    assert tenure_table_keys(r) == {b"lock:a", b"lock:b", b"lock:short"}
    old_gen = int(r.get(keyspace.TENURE_GEN))
    r.delete(b"lock:a")
    time.sleep(0.2)  # lock:short expires by itself
    scan(r)
    assert tenure_table_keys(r) == {b"lock:b"}
    assert r.exists(keyspace.tenure_table(old_gen)) == 0
    # Only the current generation is left: nothing grows scan after scan.
    tables = [
        k for k in r.scan_iter(match=keyspace.PREFIX + b"leases:*") if k != keyspace.TENURE_GEN
    ]
    assert tables == [keyspace.tenure_table(old_gen + 1)]
    # And a lock that comes back later starts over.
    r.set(b"lock:a", b"1tok")
    assert scan(r)[1][b"lock:a"].observations == 1


def test_lockguards_own_keys_are_never_reported(r: redis.Redis) -> None:
    r.set(b"lock:a", b"tok")
    r.hset(b"lock:h", REDISSON_FIELD, b"1")
    scan(r)
    scan(r)
    own = set(r.scan_iter(match=keyspace.PREFIX + b"*"))
    assert own  # the store wrote its keys
    # keys of the old keyspace format (an old version still running): never locks either
    r.set(keyspace.LEGACY_PREFIX + b"scan:lease", b"tok", px=60_000)
    r.hset(keyspace.LEGACY_PREFIX + b"leases:3", b"lock:a", b"x")
    for patterns in (
        [b"*"],
        [b"{*"],
        [keyspace.PREFIX + b"*"],
        [b"lockguard:*"],
        [b"l?ckguard:*"],  # a wildcard in the prefix: the script checks every key
        [b"[l]ockguard:*"],
        [b"l*", b"lockguard:leases:*"],
    ):
        result, seen = scan(r, patterns=patterns)
        assert not any(keyspace.is_own(k) for k in seen)
        assert result.stats.own_keys_skipped > 0
    assert set(seen) == {b"lock:a", b"lock:h"}
    assert scans.last_scan(r)["scanned"] == 2  # the store's own state survived


@pytest.mark.parametrize("mode", [ReadMode.LUA, ReadMode.PIPELINE])
def test_overlapping_patterns_count_each_lock_once(r: redis.Redis, mode: ReadMode) -> None:
    for i in range(30):
        r.set(f"lock:{i}".encode(), b"tok")
    # Small SCAN batches: repeats across batches and across patterns are both skipped.
    result, seen = scan(r, patterns=[b"lock:*", b"lock:1*", b"lock:2?"], mode=mode, count=7)
    assert result.scanned == 30
    assert len(seen) == 30
    assert result.by_reason[Reason.INFINITE_TTL] == 30


BIG = bytes(range(256)) * 4096  # 1 MiB, every byte value
BINARY_KEY = b"lock:\x00\xff\n*?[]\\ \xe9t\xc3\xa9"
BINARY_VALUE = b"\x00\xff\r\n\x7f tok \\x41"


@pytest.mark.parametrize("mode", [ReadMode.LUA, ReadMode.PIPELINE])
def test_binary_keys_and_values_are_kept_exact(r: redis.Redis, mode: ReadMode) -> None:
    """Binary values are home-made layouts: locks only with loose recognition."""
    at_limit = b"y" * MAX_VALUE_BYTES
    r.set(BINARY_KEY, BINARY_VALUE)
    r.set(b"lock:at-limit", at_limit)
    r.set(STALWART_KEY, b"1", ex=60)
    r.set("app:verrou-é".encode(), "jeton-日本".encode(), px=60_000)
    patterns = [b"lock:*", b"app:*", b"\x17*"]
    _, seen = scan(r, patterns=patterns, mode=mode, loose=True)
    assert set(seen) == {BINARY_KEY, b"lock:at-limit", STALWART_KEY, "app:verrou-é".encode()}
    assert seen[BINARY_KEY].identity == BINARY_VALUE
    assert seen[b"lock:at-limit"].reason is Reason.NOT_A_LOCK  # no token is 64 KiB long
    assert seen["app:verrou-é".encode()].identity == "jeton-日本".encode()
    _, strict = scan(r, patterns=patterns, mode=mode)
    assert strict[BINARY_KEY].reason is Reason.NOT_A_LOCK
    assert strict[STALWART_KEY].reason is Reason.HEALTHY
    time.sleep(PAST)
    _, again = scan(r, patterns=patterns, mode=mode, loose=True)
    assert again[BINARY_KEY].observations == 3  # exact bytes: the lease is found again
    assert again[STALWART_KEY].reason is Reason.STALE_LEASE
    assert again["app:verrou-é".encode()].reason is Reason.STALE_LEASE


@pytest.mark.parametrize("mode", [ReadMode.LUA, ReadMode.PIPELINE])
def test_huge_values_are_never_locks(r: redis.Redis, mode: ReadMode) -> None:
    over_limit = b"z" * (MAX_VALUE_BYTES + 1)
    r.set(b"lock:big", BIG)
    r.set(b"lock:over-limit", over_limit, px=60_000)
    r.set(b"lock:\xff" + BINARY_KEY, BIG[::-1])
    for loose in (False, True):
        result, seen = scan(r, mode=mode, loose=loose)
        assert set(seen) == {b"lock:big", b"lock:over-limit", b"lock:\xff" + BINARY_KEY}
        assert {f.reason for f in seen.values()} == {Reason.NOT_A_LOCK}
        assert "1048576-byte string" in seen[b"lock:big"].note
        assert result.findings == 0


def test_scan_keeping_no_locks_counts_healthy_ones(r: redis.Redis) -> None:
    r.set(b"lock:ok", b"tok", px=60_000)
    r.set(b"lock:forever", b"tok")
    reported: list[Finding] = []
    result = run_scan(
        r,
        ScanOptions([b"lock:*"], Policy(stale_threshold_ms=THRESHOLD_MS)),
        on_finding=reported.append,
        keep=0,
    )
    assert result.scanned == 2
    assert result.worst == []
    assert [f.key for f in reported] == [b"lock:forever"]


@pytest.mark.real
def test_pipeline_mode_gives_the_same_verdicts_as_lua(
    redis_server: object, real_redis: redis.Redis
) -> None:
    """The same history played on two databases of the real server, one scanned with the Lua
    batch read and one with pipelines."""
    lua_db = real_redis
    pipe_db = redis_server.client(db=1)  # type: ignore[attr-defined]
    pipe_db.flushdb()
    dbs = {ReadMode.LUA: lua_db, ReadMode.PIPELINE: pipe_db}

    def setup(c: redis.Redis) -> None:
        c.set(b"lock:forever", b"tok")
        c.set(b"lock:stale", b"tok", px=60_000)
        c.set(b"lock:renewed", b"tok", px=5_000)
        c.set(b"lock:reacquired", b"old", px=60_000)
        c.set(b"lock:big", BIG)
        c.set(BINARY_KEY, BINARY_VALUE, px=60_000)
        c.set(b"lock:gone", b"tok")
        c.hset(b"lock:redisson", REDISSON_FIELD, b"1")
        c.pexpire(b"lock:redisson", 60_000)
        c.rpush(b"lock:list", b"x")
        c.incr(STALWART_KEY)
        c.expire(STALWART_KEY, 10)

    def between(c: redis.Redis) -> None:
        # lock:stale (python-redis-lock's naming) and the Redisson lock: TTLs fallen below
        # what their libraries' renewals ever let them reach, as if time had passed unrenewed
        c.pexpire(b"lock:stale", 15_000)
        c.pexpire(b"lock:redisson", 30_000)
        c.pexpire(b"lock:renewed", 5_000)
        c.set(b"lock:reacquired", b"new", px=60_000)
        c.delete(b"lock:gone")
        c.incr(STALWART_KEY)
        c.expire(STALWART_KEY, 10)

    def shape(mode: ReadMode) -> dict[bytes, tuple[object, ...]]:
        _, seen = scan(dbs[mode], patterns=[b"lock:*", b"\x17*"], mode=mode)
        return {
            k: (
                f.reason,
                f.layout,
                f.identity,
                f.type,
                f.ttl_ms > 0,
                f.observations,
                f.rearms,
                f.counter,
                f.fields,
            )
            for k, f in seen.items()
        }

    for c in dbs.values():
        setup(c)
    first = {mode: shape(mode) for mode in dbs}
    assert first[ReadMode.LUA] == first[ReadMode.PIPELINE]
    time.sleep(PAST)
    for c in dbs.values():
        between(c)
    second = {mode: shape(mode) for mode in dbs}
    assert second[ReadMode.LUA] == second[ReadMode.PIPELINE]
    reasons = {k: v[0] for k, v in second[ReadMode.PIPELINE].items()}
    assert reasons == {
        b"lock:forever": Reason.INFINITE_TTL,
        b"lock:stale": Reason.STALE_LEASE,
        b"lock:renewed": Reason.LONG_HELD_RENEWING,
        b"lock:reacquired": Reason.HEALTHY,
        b"lock:big": Reason.NOT_A_LOCK,
        BINARY_KEY: Reason.NOT_A_LOCK,  # a binary value: a lock only with loose recognition
        b"lock:redisson": Reason.STALE_LEASE,
        b"lock:list": Reason.NOT_A_LOCK,
        STALWART_KEY: Reason.KEPT_ALIVE_BY_CONTENDERS,
    }
    for c in dbs.values():
        assert set(c.hkeys(keyspace.tenure_table(int(c.get(keyspace.TENURE_GEN))))) == set(reasons)
    pipe_db.flushdb()
    pipe_db.close()


def test_integer_values_beyond_64_bits_do_not_abort_the_scan(r: redis.Redis) -> None:
    """A value like 9999999999999999999 is not a counter the tenure record can hold: it is
    read as a plain token, and the rest of the scan goes on."""
    r.set(b"lock:huge-number", b"9999999999999999999")
    r.set(b"lock:-huge", b"-99999999999999999999")
    r.set(b"lock:counter", b"17", ex=60)
    result = run_scan(
        r, ScanOptions(patterns=[b"lock:*"], policy=Policy(stale_threshold_ms=30_000)), keep=10
    )
    layouts = {f.key: f.layout for f in result.worst}
    # a token under lock: (python-redis-lock's naming: its own id)
    assert layouts[b"lock:huge-number"] is Layout.PYTHON_REDIS_LOCK
    assert layouts[b"lock:-huge"] is Layout.PYTHON_REDIS_LOCK
    assert layouts[b"lock:counter"] is Layout.COUNTER
