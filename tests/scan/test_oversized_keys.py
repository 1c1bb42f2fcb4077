"""Keys over MAX_KEY_BYTES (4 KiB) under a lock pattern: counted and named by their first bytes
and length, never read, recorded in the lease table, put in a case or answered whole. With four
32 MiB keys lockguard once held gigabytes (the lease table, the open locks, the case, the
webhook's answer); now its state holds none of them. Lua and pipelined reads, fakeredis and a
real redis-server; a Redis Cluster in tests/scan/test_cluster.py's fixtures."""

from __future__ import annotations

import json

import pytest
import redis

from bot.cases.config import ReclaimConfig
from bot.cases.reclaim import scan_and_propose
from bot.core.rules import Policy
from bot.report.scan import finding_json, scan_json_head, table
from bot.scan.reader import ReadMode
from bot.scan.result import ScanOptions
from bot.scan.types import MAX_KEY_BYTES, OVERSIZED_KEPT
from bot.store import keyspace
from tests.core.test_layouts import uuid1_hex

POLICY = Policy(stale_threshold_ms=1_000)
BIG = 2 * 1024 * 1024  # 2 MiB names: the 32 MiB, scaled to the test's memory


def huge_key(tag: bytes, size: int = BIG) -> bytes:
    return b"lock:" + tag + b"x" * (size - 5 - len(tag))


def own_bytes(client: redis.Redis) -> int:
    """The bytes lockguard's own keys hold in Redis (their names and serialized values)."""
    total = 0
    for key in client.scan_iter(match=b"{lockguard}:*", count=1000):
        total += len(key) + len(client.dump(key) or b"")
    return total


@pytest.mark.parametrize("mode", [ReadMode.LUA, ReadMode.PIPELINE])
def test_oversized_keys_are_counted_and_named_never_read_or_kept(
    r: redis.Redis, mode: ReadMode
) -> None:
    old = uuid1_hex(int(r.time()[0]) * 1000 - 7_200_000)
    for tag in (b"a", b"b", b"c", b"d"):
        r.set(huge_key(tag), old)
    r.set(b"lock:" + b"k" * (MAX_KEY_BYTES - 5), old)  # exactly at the bound: read
    r.set(b"lock:normal", old)
    opts = ScanOptions([b"lock:*"], POLICY, mode=mode)
    cfg = ReclaimConfig(dry_run=False, policy=POLICY, patterns=(b"lock:*",))
    result, case = scan_and_propose(r, opts, cfg, keep=1000)
    assert result.scanned == 2
    assert {len(f.key) for f in result.worst} == {MAX_KEY_BYTES, len(b"lock:normal")}
    assert case is not None
    assert {len(lk.key) for lk in case.locks} == {MAX_KEY_BYTES, len(b"lock:normal")}
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
    assert "4 key(s) over 4096 bytes not read" in shown
    assert len(shown) < 50_000
    gen = r.get(keyspace.LEASE_GEN)
    assert gen is not None
    assert all(len(k) <= MAX_KEY_BYTES for k in r.hkeys(keyspace.lease_table(int(gen))))
    assert own_bytes(r) < 1024 * 1024  # none of the 8 MiB of names is in lockguard's state


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
