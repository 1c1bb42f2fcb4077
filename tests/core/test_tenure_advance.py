"""The scan's one-step tenure update (`tenures.advance`) is exactly `track(decode(record))` and
that tenure's `encode`, for every kind of stored record: same tenure, same stored bytes, so the
verdicts a scan reports do not depend on which of the two paths ran."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from bot.core import tenures
from bot.core.layouts import COUNTER_IDENTITY
from bot.core.model import Layout, Recognized, Snapshot, Tenure

T0 = 1_767_225_600_000
IDENTITIES = [b"t1", b"t2", COUNTER_IDENTITY]
ms = st.integers(min_value=T0 - 10**9, max_value=T0 + 10**9)
pttls = st.one_of(st.sampled_from([-2, -1, 0, 1]), st.integers(-(10**4), 10**8))
maybe_int = st.one_of(st.none(), st.integers(0, 2 * 10**9))

tenures_ = st.builds(
    Tenure,
    first_seen_ms=ms,
    last_seen_ms=ms,
    last_pttl_ms=pttls,
    observations=st.integers(1, 2**31 - 2),
    rearms=st.integers(0, 2**31 - 2),
    last_rearm_ms=st.one_of(st.none(), ms),
    max_pttl_ms=pttls,
    counter_start=maybe_int,
    counter_last=maybe_int,
    identity_digest=st.sampled_from([tenures.identity_digest(i) for i in IDENTITIES]),
)
kinds = st.sampled_from(["string", "hash", "list", ""])
records = st.one_of(
    st.none(),
    tenures_.map(tenures.encode),
    st.builds(tenures.encode, tenures_, kinds),  # with the key's type as a hint
    tenures_.map(lambda tenure: tenures.encode(tenure)[1:]),  # version 1: the bare body
    st.binary(max_size=90),  # unreadable: a new tenure
    tenures_.map(lambda tenure: b"\x07" + tenures.encode(tenure)[1:]),  # an unknown version
)
recognized = st.one_of(
    st.builds(
        Recognized,
        layout=st.sampled_from([Layout.STRING, Layout.REDIS_PY, Layout.REDISSON]),
        identity=st.sampled_from(IDENTITIES),
        acquired_ms=st.one_of(st.none(), ms),
    ),
    st.builds(
        Recognized,
        layout=st.just(Layout.COUNTER),
        identity=st.just(COUNTER_IDENTITY),
        counter=st.one_of(st.none(), st.integers(0, 2 * 10**9)),
    ),
)
snapshots = st.builds(
    Snapshot, key=st.just(b"lock:a"), type=st.sampled_from(["string", "hash"]), pttl_ms=pttls,
    idle_s=st.just(0), observed_ms=ms,
)  # fmt: skip


@given(records, snapshots, recognized)
def test_advance_is_track_of_decode_then_encode(
    record: bytes | None, snap: Snapshot, rec: Recognized
) -> None:
    expected = tenures.track(tenures.decode(record), snap, rec)
    assert tenures.advance(record, snap, rec) == (expected, tenures.encode(expected, snap.type))


def test_a_continued_lease_is_stored_in_the_same_82_bytes() -> None:
    rec = Recognized(Layout.STRING, b"t1")
    _, record = tenures.advance(None, Snapshot(b"lock:a", "string", 60_000, 0, T0), rec)
    second, again = tenures.advance(record, Snapshot(b"lock:a", "string", 80_000, 0, T0 + 10), rec)
    assert len(record) == len(again) == tenures.RECORD_SIZE == 82
    assert (second.first_seen_ms, second.observations, second.rearms) == (T0, 2, 1)
    assert struct.unpack_from("<q", again, 1)[0] == T0


@given(tenures_, kinds)
def test_the_type_hint_is_one_flag_bit_older_versions_ignore(tenure: Tenure, kind: str) -> None:
    """The hint changes byte 65 (the flags) only, by a bit versions without it never read:
    every tenure field decodes the same, and the next scan's tenure does not depend on it."""
    plain, hinted = tenures.encode(tenure), tenures.encode(tenure, kind)
    bit = {"string": 8, "hash": 16}.get(kind, 0)
    assert hinted == plain[:65] + bytes([plain[65] | bit]) + plain[66:]
    assert plain[65] & (8 | 16) == 0
    assert tenures.decode(hinted) == tenures.decode(plain)
    rec = Recognized(Layout.STRING, b"t1")
    snap = Snapshot(b"lock:a", "string", 1_000, 0, T0)
    assert tenures.advance(hinted, snap, rec) == tenures.advance(plain, snap, rec)


def test_a_written_record_carries_the_type_it_was_read_as() -> None:
    rec = Recognized(Layout.STRING, b"t1")
    for kind, bit in (("string", 8), ("hash", 16), ("list", 0)):
        _, first = tenures.advance(None, Snapshot(b"lock:a", kind, 60_000, 0, T0), rec)
        _, again = tenures.advance(first, Snapshot(b"lock:a", kind, 59_000, 0, T0 + 10), rec)
        assert first[65] & 24 == again[65] & 24 == bit
    _, changed = tenures.advance(first, Snapshot(b"lock:a", "hash", 59_000, 0, T0 + 20), rec)
    assert changed[65] & 24 == 16  # the type seen now, not the one before
