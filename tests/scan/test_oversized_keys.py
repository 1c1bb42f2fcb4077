"""Keys over MAX_KEY_BYTES (4 KiB) under a lock pattern: counted and named by their first bytes
and length, never held whole in lockguard's state, cases or answers. With four 32 MiB keys
lockguard once held gigabytes (the tenure table, the open locks, the case, the webhook's answer);
now its state holds none of them. In Lua batches (one server) the first OVERSIZED_KEPT are read
in Redis and tracked by their first and last bytes (`bot.core.model.BigKey`): a lock among them is
offered with its sha256 (its release: tests/cases/test_oversized_release.py); pipelined reads only
count them. Lua and pipelined reads, fakeredis and a real redis-server."""

from __future__ import annotations

import hashlib
import json

import pytest
import redis

from bot.cases.opening import scan_and_propose
from bot.cases.reclaim_config import ReclaimConfig
from bot.core.rules import Policy
from bot.report.scan import finding_json, scan_json_head, table
from bot.scan.result import ScanOptions
from bot.scan.scanner import ReadMode
from bot.scan.types import MAX_KEY_BYTES, OVERSIZED_KEPT
from bot.store import keyspace
from tests.core.test_layouts import uuid1_hex

POLICY = Policy(stale_threshold_ms=1_000)
BIG = 60 * 1024  # tracked (read in Redis) in Lua mode: at most MAX_TRACKED_KEY_BYTES


def huge_key(tag: bytes, size: int = BIG) -> bytes:
    return b"lock:" + tag + b"x" * (size - 5 - len(tag))


def own_bytes(client: redis.Redis) -> int:
    """The bytes lockguard's own keys hold in Redis (their names and serialized values)."""
    total = 0
    for key in client.scan_iter(match=b"{lockguard}:*", count=1000):
        total += len(key) + len(client.dump(key) or b"")
    return total


@pytest.mark.parametrize("mode", [ReadMode.LUA, ReadMode.PIPELINE])
def test_oversized_keys_are_never_held_whole(r: redis.Redis, mode: ReadMode) -> None:
    old = uuid1_hex(int(r.time()[0]) * 1000 - 7_200_000)
    keys = [huge_key(tag) for tag in (b"a", b"b", b"c", b"d")]
    for key in keys:
        r.set(key, old)
    r.set(b"lock:" + b"k" * (MAX_KEY_BYTES - 5), old)  # exactly at the bound: read
    r.set(b"lock:normal", old)
    opts = ScanOptions([b"lock:*"], POLICY, mode=mode)
    cfg = ReclaimConfig(dry_run=False, policy=POLICY, patterns=(b"lock:*",))
    result, case = scan_and_propose(r, opts, cfg, keep=1000)
    lua = mode is ReadMode.LUA
    assert result.scanned == (6 if lua else 2)
    assert case is not None
    digests = sorted(lk.big.sha256 for lk in case.locks if lk.big is not None)
    assert digests == (sorted(hashlib.sha256(k).hexdigest() for k in keys) if lua else [])
    assert all(len(lk.key) <= MAX_KEY_BYTES for lk in case.locks)
    assert all(len(f.key) <= MAX_KEY_BYTES for f in result.worst)
    summary = result.summary()
    assert summary["oversized_keys"] == 4
    named = summary["oversized"]
    assert isinstance(named, list)
    assert sorted(e["key_bytes"] for e in named) == [BIG] * 4
    assert all(e["key_prefix"].startswith("lock:") and len(e["key_prefix"]) < 100 for e in named)
    head = json.dumps(scan_json_head(result, case, "redis://x"))
    assert len(head) < 100_000  # the answer names them by prefix, never whole
    assert all(len(json.dumps(finding_json(f))) < 20_000 for f in result.worst)
    shown = table(result, "redis://x", ["lock:*"], threshold_seconds=1)
    said = "4 read in Redis by their first and last bytes, never whole" if lua else "not read"
    assert f"4 key(s) over 4096 bytes ({said})" in shown
    assert len(shown) < 50_000
    gen = r.get(keyspace.TENURE_GEN)
    assert gen is not None
    assert all(len(k) <= MAX_KEY_BYTES for k in r.hkeys(keyspace.tenure_table(int(gen))))
    assert own_bytes(r) < 100_000  # none of the 240 KiB of names is in lockguard's state


def test_only_the_first_oversized_keys_are_named(r: redis.Redis) -> None:
    for i in range(OVERSIZED_KEPT + 5):
        r.set(huge_key(str(i).encode(), MAX_KEY_BYTES + 1), b"tok")
    result, _ = scan_and_propose(
        r,
        ScanOptions([b"lock:*"], POLICY),
        ReclaimConfig(policy=POLICY, patterns=(b"lock:*",)),
    )
    assert result.stats.oversized == OVERSIZED_KEPT + 5
    assert len(result.stats.oversized_keys) == OVERSIZED_KEPT


def test_keys_over_the_tracked_bound_are_counted_and_named_but_never_read(r: redis.Redis) -> None:
    """Over MAX_TRACKED_KEY_BYTES (2 MiB here; the issue's keys were 32 MiB) no command names the
    key, in Lua batches too: counted and named only, never in a case."""
    old = uuid1_hex(int(r.time()[0]) * 1000 - 7_200_000)
    for tag in (b"a", b"b"):
        r.set(huge_key(tag, 2 * 1024 * 1024), old)
    r.set(b"lock:normal", old)
    opts = ScanOptions([b"lock:*"], POLICY, mode=ReadMode.LUA)
    cfg = ReclaimConfig(dry_run=False, policy=POLICY, patterns=(b"lock:*",))
    result, case = scan_and_propose(r, opts, cfg, keep=1000)
    assert result.scanned == 1
    assert result.stats.oversized == 2
    assert result.stats.oversized_read == {}
    assert case is not None
    assert [lk.key for lk in case.locks] == [b"lock:normal"]
    assert own_bytes(r) < 100_000
