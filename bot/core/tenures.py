"""Tenures (pure): one holder's continuous hold of one lock across scans: the same holder as last
time? Was its TTL re-armed? Each is kept between scans in Redis (`bot.store.scans`, keys still
named `leases:N`) as a fixed 82-byte record, so a million locks cost the server under 150 MB.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

from bot.core.model import Layout, Recognized, Snapshot, Tenure

#: A PTTL this much above what the previous scan's PTTL predicts means someone re-armed the TTL.
#: Both readings come from one atomic server-side read per batch, so the error is a few ms.
REARM_SLACK_MS = 500

_RECORD = struct.Struct("<qqqiiqqqqB16s")  # see encode(): the body, 81 bytes
#: The record's first byte. Version 1 (the bare body) is still read; any other version or size
#: starts the tenure again, which can only delay a verdict, never hasten one.
VERSION = 2
RECORD_SIZE = 1 + _RECORD.size
_PACKED = struct.Struct("<B" + _RECORD.format[1:])  # the version byte and the body: a record
_blake2b = hashlib.blake2b
_COUNTER = Layout.COUNTER  # bound once: a member lookup through the enum class costs ~80 ns
_HAS_REARM, _HAS_COUNTER, _COUNTER_GREW = 1, 2, 4
#: The key's type when written, so the next scan's batch script may skip TYPE. Only a hint (the
#: script checks it); no tenure field depends on it.
_WAS_STRING, _WAS_HASH = 8, 16
_TYPE_BITS = {"string": _WAS_STRING, "hash": _WAS_HASH}
_NONE = -(2**63)
# track(), _begin(), advance() and decode() build Tenures positionally: they rely on this order.
assert Tenure.__match_args__ == (
    "first_seen_ms",
    "last_seen_ms",
    "last_pttl_ms",
    "observations",
    "rearms",
    "last_rearm_ms",
    "max_pttl_ms",
    "counter_start",
    "counter_last",
    "identity_digest",
), "bot.core.model.Tenure changed: update the positional Tenure(...) calls in bot.core.tenures"


def identity_digest(identity: bytes) -> bytes:
    return _blake2b(identity, digest_size=16).digest()


def track(prev: Tenure | None, snap: Snapshot, rec: Recognized) -> Tenure:
    """The tenure after this observation: the previous one continued, or a new one begun."""
    now = snap.observed_ms
    digest = identity_digest(rec.identity)
    if prev is not None and _same_holder(prev, digest, rec):
        rearmed = _rearmed(prev, snap)
        counter_last = rec.counter if rec.counter is not None else prev.counter_last
        return Tenure(
            prev.first_seen_ms,  # first_seen_ms
            now,  # last_seen_ms
            snap.pttl_ms,  # last_pttl_ms
            prev.observations + 1,  # observations
            prev.rearms + (1 if rearmed else 0),  # rearms
            now if rearmed else prev.last_rearm_ms,  # last_rearm_ms
            max(prev.max_pttl_ms, snap.pttl_ms),  # max_pttl_ms
            prev.counter_start,  # counter_start
            counter_last,  # counter_last
            digest,  # identity_digest
        )
    return _begin(snap, rec, digest)


def _begin(snap: Snapshot, rec: Recognized, digest: bytes) -> Tenure:
    now = snap.observed_ms
    first = now
    if rec.acquired_ms is not None and rec.acquired_ms < now:
        first = rec.acquired_ms  # the value says when it was taken: age known on first sight
    return Tenure(
        first,  # first_seen_ms
        now,  # last_seen_ms
        snap.pttl_ms,  # last_pttl_ms
        1,  # observations
        0,  # rearms
        None,  # last_rearm_ms
        snap.pttl_ms,  # max_pttl_ms
        rec.counter,  # counter_start
        rec.counter,  # counter_last
        digest,  # identity_digest
    )


def _same_holder(prev: Tenure, digest: bytes, rec: Recognized) -> bool:
    if prev.identity_digest != digest:
        return False
    if rec.layout is _COUNTER:
        # No token: the same tenure only while the count never went down (a DEL and a fresh
        # INCR starts again at 1).
        return (
            rec.counter is not None
            and prev.counter_last is not None
            and rec.counter >= prev.counter_last
        )
    return True


def _rearmed(prev: Tenure, snap: Snapshot) -> bool:
    if snap.pttl_ms <= 0:
        return False
    if prev.last_pttl_ms == -1:
        return True  # an expiry was added to a lock that had none: someone alive touched it
    if prev.last_pttl_ms <= 0:
        return False
    expected = prev.last_pttl_ms - (snap.observed_ms - prev.last_seen_ms)
    return snap.pttl_ms > expected + REARM_SLACK_MS


def advance(record: bytes | None, snap: Snapshot, rec: Recognized) -> tuple[Tenure, bytes]:
    """`track(decode(record), snap, rec)` and its `encode`, in one step: the scan's hot path."""
    digest = _blake2b(rec.identity, digest_size=16).digest()
    prev = _unpack(record)
    kind = snap.type
    if prev is None or prev[10] != digest:
        tenure = _begin(snap, rec, digest)
        return tenure, encode(tenure, kind)
    first, last, last_pttl, obs, rearms, last_rearm, max_pttl, c_start, c_last, flags, _ = prev
    has_counter = flags & _HAS_COUNTER
    counter = rec.counter
    if rec.layout is _COUNTER and (counter is None or not has_counter or counter < c_last):
        tenure = _begin(snap, rec, digest)  # see _same_holder
        return tenure, encode(tenure, kind)
    now, pttl = snap.observed_ms, snap.pttl_ms
    flags &= _HAS_REARM | _HAS_COUNTER
    if pttl > 0 and (  # see _rearmed
        last_pttl == -1 or (last_pttl > 0 and pttl > last_pttl - (now - last) + REARM_SLACK_MS)
    ):
        rearms += 1
        last_rearm = now
        flags |= _HAS_REARM
    counter_last = counter if counter is not None else (c_last if has_counter else None)
    counter_start = c_start if has_counter else None
    if pttl > max_pttl:
        max_pttl = pttl
    obs += 1
    tenure = Tenure(
        first,
        now,
        pttl,
        obs,
        rearms,
        last_rearm if flags & _HAS_REARM else None,
        max_pttl,
        counter_start,
        counter_last,
        digest,
    )
    packed = _PACKED.pack(
        VERSION, first, now, pttl, obs, rearms, last_rearm if flags & _HAS_REARM else _NONE,
        max_pttl, c_start if has_counter else _NONE,
        _NONE if counter_last is None else counter_last, flags | _TYPE_BITS.get(kind, 0), digest,
    )  # fmt: skip
    return tenure, packed


def _unpack(record: bytes | None) -> tuple[Any, ...] | None:
    if record is None:
        return None
    size = len(record)
    if size == RECORD_SIZE and record[0] == VERSION:
        return _RECORD.unpack_from(record, 1)
    if size == _RECORD.size:
        return _RECORD.unpack_from(record, 0)  # version 1: the body alone
    return None


def encode(tenure: Tenure, kind: str = "") -> bytes:
    """The tenure's stored record; `kind`, the key's type ("string", "hash"), is kept as a hint."""
    flags = _TYPE_BITS.get(kind, 0)
    if tenure.last_rearm_ms is not None:
        flags |= _HAS_REARM
    if tenure.counter_start is not None:
        flags |= _HAS_COUNTER
    return _PACKED.pack(
        VERSION,
        tenure.first_seen_ms,
        tenure.last_seen_ms,
        tenure.last_pttl_ms,
        tenure.observations,
        tenure.rearms,
        tenure.last_rearm_ms if tenure.last_rearm_ms is not None else _NONE,
        tenure.max_pttl_ms,
        tenure.counter_start if tenure.counter_start is not None else _NONE,
        tenure.counter_last if tenure.counter_last is not None else _NONE,
        flags,
        tenure.identity_digest,
    )


def decode(record: bytes | None) -> Tenure | None:
    """The stored tenure, or None for a missing, unreadable or unknown-version record (a new
    tenure starts)."""
    fields = _unpack(record)
    if fields is None:
        return None
    (first, last, pttl, obs, rearms, last_rearm, max_pttl, c_start, c_last, flags, digest) = fields
    has_counter = bool(flags & _HAS_COUNTER)
    return Tenure(  # positional, in field order
        first,
        last,
        pttl,
        obs,
        rearms,
        last_rearm if flags & _HAS_REARM else None,
        max_pttl,
        c_start if has_counter else None,
        c_last if has_counter else None,
        digest,
    )
