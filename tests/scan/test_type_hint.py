"""The previous tenure record's type hint (`bot.core.tenures`, flags 8/16) lets the batch script
skip TYPE: a lock whose type changed since is still read as what it is now, a key gone is still
counted vanished, a done key still skipped, and unchanged locks cost no error on the server
(real redis-server: WRONGTYPE and nil replies are what the hint path relies on)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from bot.core import tenures
from bot.core.model import Snapshot, Tenure
from bot.core.rules import Policy
from bot.scan import ReadMode, Scanner
from bot.scan.batch_script import READ_KEY_FN
from bot.scan.loop import run_scan
from bot.scan.result import ScanOptions
from bot.store import keyspace

PREV, NEW = keyspace.tenure_table(9000), keyspace.tenure_table(9001)
LEASE = Tenure(1, 1, 60_000, 1, 0, None, 60_000, None, None, tenures.identity_digest(b"t"))
FIELD = b"6f1c2c1e-6f3a-4a5b-9c1d-2b3c4d5e6f70:1"


def hinted(kind: str) -> bytes:
    record = tenures.encode(LEASE, kind)
    assert record[65] & 24 == {"string": 8, "hash": 16}[kind]
    return record


def read(client: redis.Redis) -> dict[bytes, Snapshot]:
    scanner = Scanner(client, mode=ReadMode.LUA)
    out = {}
    for batch in scanner.batches([b"lock:*"], PREV, NEW):
        for snap, prev in batch:
            assert prev == client.hget(PREV, snap.key)  # the record is handed on as it was
            out[snap.key] = snap
    assert scanner.stats.vanished == 0
    return out


@pytest.mark.parametrize(
    ("was", "now"),
    [("string", "hash"), ("hash", "string"), ("string", "list"), ("hash", "list")],
)
def test_a_lock_whose_type_changed_since_the_last_scan_is_read_as_it_is_now(
    real_redis: redis.Redis, was: str, now: str
) -> None:
    r = real_redis
    r.hset(PREV, b"lock:a", hinted(was))
    r.hset(PREV, b"lock:same", hinted(was))
    if was == "string":
        r.set(b"lock:same", b"tok", px=60_000)
    else:
        r.hset(b"lock:same", FIELD, b"1")
    if now == "string":
        r.set(b"lock:a", b"tok-now", px=50_000)
    elif now == "hash":
        r.hset(b"lock:a", mapping={FIELD: b"2"})
        r.pexpire(b"lock:a", 50_000)
    else:
        r.rpush(b"lock:a", b"x", b"y")
    snaps = read(r)
    a = snaps[b"lock:a"]
    assert a.type == now
    if now == "string":
        assert (a.value, a.value_len) == (b"tok-now", 7)
    elif now == "hash":
        assert (a.fields, a.hash_len) == (((FIELD, b"2"),), 1)
    else:
        assert (a.value, a.fields) == (None, ())
    assert a.pttl_ms == -1 if now == "list" else 0 < a.pttl_ms <= 50_000
    assert snaps[b"lock:same"].type == was  # the hint right: read as before


def test_a_long_hinted_string_is_still_cut(real_redis: redis.Redis) -> None:
    real_redis.hset(PREV, b"lock:big", hinted("string"))
    real_redis.set(b"lock:big", b"x" * 5000)
    scanner = Scanner(real_redis, mode=ReadMode.LUA, max_value_bytes=100)
    [[(snap, _)]] = list(scanner.batches([b"lock:*"], PREV, NEW))
    assert (len(snap.value or b""), snap.value_len) == (100, 5000)


# read_key alone (the SCAN in front of it cannot lose a key within its own script): a key
# SCAN returned that is gone by the time it is read, or that this scan already wrote.
_READ_ONE = (
    READ_KEY_FN
    + """
local out = {}
local m, skip = read_key(out, 0, KEYS[1], ARGV[2] == '1', ARGV[1], 10, 100)
return {m, skip or false, out}
"""
)


def read_one(client: redis.Redis, key: bytes, record: bytes, done: bool = False) -> Any:
    return client.eval(_READ_ONE, 1, key, record, b"1" if done else b"0")


@pytest.mark.parametrize("kind", ["string", "hash"])
def test_a_hinted_key_gone_before_it_is_read_is_counted_vanished(
    real_redis: redis.Redis, kind: str
) -> None:
    assert read_one(real_redis, b"lock:gone", hinted(kind)) == [0, b"none", []]
    assert read_one(real_redis, b"lock:gone", hinted(kind), done=True) == [0, b"none", []]
    assert read_one(real_redis, b"lock:gone", b"") == [0, b"none", []]  # no hint: as before


def test_a_hinted_key_this_scan_wrote_is_skipped(real_redis: redis.Redis) -> None:
    real_redis.set(b"lock:a", b"tok")
    assert read_one(real_redis, b"lock:a", hinted("string"), done=True) == [0, b"dup", []]
    m, skip, out = read_one(real_redis, b"lock:a", hinted("hash"))
    assert (m, skip, out[1], out[4], out[5]) == (7, None, b"string", b"tok", 3)


def errors(client: redis.Redis) -> dict[str, Any]:
    return dict(client.info("errorstats"))  # one entry per error prefix the server replied


def test_scans_of_unchanged_locks_raise_no_error_and_send_no_type(
    real_redis: redis.Redis,
) -> None:
    r = real_redis
    for i in range(50):
        if i % 5 == 0:
            r.hset(b"lock:%d" % i, FIELD, b"1")
        else:
            r.set(b"lock:%d" % i, b"tok%d" % i, px=600_000)
    options = ScanOptions([b"lock:*"], Policy(stale_threshold_ms=900_000), mode=ReadMode.LUA)
    r.config_resetstat()
    assert run_scan(r, options).scanned == 50
    assert errors(r) == {}
    r.config_resetstat()
    assert run_scan(r, options).scanned == 50
    assert errors(r) == {}
    assert "cmdstat_type" not in r.info("commandstats")  # every lock's type came from its record
    r.delete(b"lock:1")
    r.hset(b"lock:1", FIELD, b"1")  # a string now a hash: one WRONGTYPE, then read right
    result = run_scan(r, options)
    assert result.scanned == 50
    assert r.info("commandstats")["cmdstat_type"]["calls"] == 1
    assert errors(r) == {"errorstat_WRONGTYPE": {"count": 1}}  # only a real change costs one


def test_without_idle_times_a_hinted_key_is_read_by_its_type(real_redis: redis.Redis) -> None:
    """An LFU policy keeps no idle time (OBJECT IDLETIME is an error): the key is read as
    without a hint, its idle time unknown (-1)."""
    real_redis.set(b"lock:a", b"tok")
    real_redis.config_set("maxmemory-policy", "allkeys-lfu")
    try:
        m, skip, out = read_one(real_redis, b"lock:a", hinted("hash"))
    finally:
        real_redis.config_set("maxmemory-policy", "noeviction")
    assert (m, skip, out[1], out[2], out[4]) == (7, None, b"string", -1, b"tok")
