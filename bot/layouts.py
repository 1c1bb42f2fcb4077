"""Recognise which library made a lock, what its identity is and who holds it (pure).

The identity is what proves "the same holder still holds it" (DESIGN §2): the token for string
locks, the holder field(s) for Redisson-style hashes, and for counter locks nothing but the
unbroken existence of the key (the count is tracked separately, it changes on every contender).

Shapes come from `shared/research/lock-layouts.md` §0 and §13.2; the heuristics are ordered from
the most specific (key prefix and value shape together) to the least (value shape alone).
"""

from __future__ import annotations

import binascii
import re
from dataclasses import replace
from datetime import datetime

from bot.model import Layout, Recognized, Snapshot

_HEX32 = re.compile(rb"[0-9a-f]{32}")
_UUID = rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_UUID_RE = re.compile(_UUID)
_MUTEX = re.compile(_UUID + rb"(-.*)?", re.DOTALL)
_B64_24 = re.compile(rb"[A-Za-z0-9+/]{22}[A-Za-z0-9+/=]{2}")
_BULL_TOKEN = re.compile(rb"(" + _UUID + rb"):(\d+)")
_SHEDLOCK = re.compile(
    rb"ADDED:(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)@(.*?)(?::(" + _UUID + rb"))?",
    re.DOTALL,
)
_REDISSON_FIELD = re.compile(rb"(" + _UUID + rb"):(\d+)(:write)?")
_INTEGER = re.compile(rb"-?\d{1,18}")  # fits the lease record's int64; longer is a string

# 100-ns intervals between the uuid1 epoch (1582-10-15) and the Unix epoch.
_UUID1_EPOCH_OFFSET = 0x01B21DD213814000
# A decimal value this many ms either side of the server time reads as a Unix timestamp.
_STAMP_WINDOW_S = 10 * 365 * 86400

COUNTER_IDENTITY = b"<counter>"
SHA1_IDENTITY_PREFIX = b"sha1:"


def recognize(snap: Snapshot) -> Recognized:
    """Layout, identity, owner and (when the value carries it) the acquisition time of a lock."""
    if snap.type == "string" and snap.value is not None:
        rec = _recognize_string(snap.key, snap.value, snap.observed_ms)
        if snap.value_sha1 is not None:
            # Too long to carry around: the identity is the value's SHA-1, which the release
            # script compares with redis.sha1hex of the value it finds.
            rec = replace(rec, identity=SHA1_IDENTITY_PREFIX + snap.value_sha1)
        return rec
    if snap.type == "hash":
        return _recognize_hash(snap.fields)
    return Recognized(Layout.OTHER, b"")


def _recognize_string(key: bytes, value: bytes, now_ms: int) -> Recognized:
    if value.startswith(b"ADDED:"):
        m = _SHEDLOCK.fullmatch(value)
        if m is not None:
            host = m.group(2).decode("utf-8", "replace")
            return Recognized(Layout.SHEDLOCK, value, owner=f"host {host}",
                              acquired_ms=_iso_ms(m.group(1)))
    if key.endswith(b":lock"):
        m = _BULL_TOKEN.fullmatch(value)
        if m is not None:
            parts = key.split(b":")
            job = parts[-2].decode("utf-8", "replace") if len(parts) >= 3 else "?"
            worker = m.group(1).decode()
            return Recognized(Layout.BULLMQ, value, owner=f"worker {worker} job {job}")
    if len(value) == 32 and _HEX32.fullmatch(value) is not None:
        if value[12:13] == b"1" and value[16:17] in (b"8", b"9", b"a", b"b"):
            acquired, node = _uuid1_time_node(value)
            if abs(acquired - now_ms) < _STAMP_WINDOW_S * 1000:
                return Recognized(Layout.REDIS_PY, value, owner=f"node {node}",
                                  acquired_ms=acquired)
        return Recognized(Layout.NODE_REDLOCK, value)
    if key.startswith(b"lock:") and len(value) == 24 and _B64_24.fullmatch(value) is not None:
        return Recognized(Layout.PYTHON_REDIS_LOCK, value)
    if key.startswith(b"redlock:") and _UUID_RE.fullmatch(value) is not None:
        return Recognized(Layout.POTTERY, value)
    if key.startswith(b"mutex:") and _MUTEX.fullmatch(value) is not None:
        return Recognized(Layout.REDIS_SEMAPHORE, value)
    if key.startswith(b"SINGLETONLOCK_"):
        return Recognized(Layout.CELERY_SINGLETON, value,
                          owner=f"task {value.decode('utf-8', 'replace')[:64]}")
    if _INTEGER.fullmatch(value) is not None:
        number = int(value)
        now_s = now_ms // 1000
        if abs(number - now_s) < _STAMP_WINDOW_S:
            # Stalwart >= 0.16.16: the value is the intended expiry, a token of sorts.
            return Recognized(Layout.EXPIRY_STAMP, value)
        return Recognized(Layout.COUNTER, COUNTER_IDENTITY, counter=number)
    return Recognized(Layout.STRING, value)


def _recognize_hash(fields: tuple[tuple[bytes, bytes], ...]) -> Recognized:
    names = [name for name, _ in fields]
    match = _REDISSON_FIELD.fullmatch
    found = []  # (holder field, its match), sorted by field: one regex match per field
    for n in names:
        m = match(n)
        if m is not None:
            found.append((n, m))
    if len(found) > 1:
        found.sort(key=_first)
    holders = [n for n, _ in found]
    if b"mode" in names:
        owner = ", ".join(_owner_of(m) for _, m in found)
        return Recognized(Layout.REDISSON_RW, b"\n".join(holders), owner=owner)
    if holders:
        owner = ", ".join(_owner_of(m) for _, m in found)
        return Recognized(Layout.REDISSON, b"\n".join(holders), owner=owner)
    return Recognized(Layout.HASH, b"\n".join(sorted(names)))


def _first(pair: tuple[bytes, object]) -> bytes:
    return pair[0]


def _redisson_owner(field: bytes) -> str:
    m = _REDISSON_FIELD.fullmatch(field)
    assert m is not None
    return _owner_of(m)


def _owner_of(m: re.Match[bytes]) -> str:
    return f"client {m.group(1).decode()} thread {m.group(2).decode()}"


def _uuid1_time_node(hex32: bytes) -> tuple[int, str]:
    # Called once per redis-py lock (millions per scan): ints straight from the ASCII bytes.
    time_low, time_mid, time_hi = int(hex32[0:8], 16), int(hex32[8:12], 16), int(hex32[13:16], 16)
    ticks = (time_hi << 48) | (time_mid << 32) | time_low
    ms = (ticks - _UUID1_EPOCH_OFFSET) // 10_000
    node = binascii.unhexlify(hex32[20:32]).hex(":")  # lowercase: _HEX32 matched already
    return ms, node


def _iso_ms(text: bytes) -> int | None:
    try:
        dt = datetime.fromisoformat(text.decode().replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(dt.timestamp() * 1000)
