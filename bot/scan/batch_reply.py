"""The batch scripts' reply (`bot.scan.batch_script`) read back as snapshots: once per lock."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from bot.core.clock import time_ms
from bot.core.model import BigKey, Snapshot
from bot.scan.batch_script import HEAD
from bot.scan.types import Batch, ScanStats

# parse_reply builds Snapshots with positional arguments: it relies on this field order.
assert Snapshot.__match_args__[:9] == (
    "key",
    "type",
    "pttl_ms",
    "idle_s",
    "observed_ms",
    "value",
    "value_len",
    "fields",
    "hash_len",
), "bot.core.model.Snapshot changed: update bot.scan.batch_reply.parse_reply"
_TYPE_NAMES = {t.encode(): t for t in ("string", "hash", "list", "set", "zset", "stream")}


def parse_reply(
    reply: list[Any], in_hand: AbstractSet[bytes], stats: ScanStats, max_fields: int
) -> Batch:
    """A READ_KEYS_LUA (or CLUSTER_READ_KEYS_LUA) reply as a batch, skipping keys `in_hand` (read
    before their batch was written) and counting into `stats`."""
    stats.scan_calls += int(reply[3])
    stats.keys_returned += int(reply[4])
    stats.duplicates += int(reply[5])
    stats.own_keys_skipped += int(reply[6])
    stats.vanished += int(reply[7])
    stats.moving += int(reply[8])
    now_ms = time_ms(reply[1], reply[2])
    out: Batch = []
    append = out.append
    it = iter(reply)
    for _ in range(HEAD):
        next(it)
    for key, t, idle, pttl, payload, size, prev in zip(it, it, it, it, it, it, it, strict=True):
        if key in in_hand:
            stats.duplicates += 1  # in the batch before: not yet written when this was read
            continue
        if t == b"string":
            if payload.__class__ is list:  # longer than max_value_bytes: {its start}
                payload = payload[0]
            snap = Snapshot(key, "string", pttl, idle, now_ms, payload, size)
        elif t == b"hash":
            flat = payload if isinstance(payload, list) else []
            pairs = tuple(zip(flat[0::2], flat[1::2], strict=True))[:max_fields]
            snap = Snapshot(key, "hash", pttl, idle, now_ms, None, 0, pairs, size)
        else:
            name = _TYPE_NAMES.get(t) or t.decode()
            snap = Snapshot(key, name, pttl, idle, now_ms)
        append((snap, prev))
    return out


def parse_oversized(flat: list[Any], sec: int, usec: int, max_fields: int) -> list[Snapshot]:
    """The oversized keys a SCAN_KEYS_LUA reply read (8 items each: first bytes, type, idle,
    pttl, payload, size, last bytes, length) as snapshots filed under their `BigKey.name`."""
    now_ms = time_ms(sec, usec)
    out = []
    it = iter(flat)
    for head, t, idle, pttl, payload, size, tail, length in zip(
        it, it, it, it, it, it, it, it, strict=True
    ):
        big = BigKey(bytes(head), bytes(tail), int(length))
        snap = Snapshot(big.name, _TYPE_NAMES.get(t) or t.decode(), pttl, idle, now_ms, big=big)
        if t == b"string":
            snap.value = payload[0] if isinstance(payload, list) else payload
            snap.value_len = size
        elif t == b"hash":
            pairs = payload if isinstance(payload, list) else []
            snap.fields = tuple(zip(pairs[0::2], pairs[1::2], strict=True))[:max_fields]
            snap.hash_len = size
        out.append(snap)
    return out
