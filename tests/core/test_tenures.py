"""Tenure tracking across scans (pure): the same holder continues its tenure, a new holder starts a
new one, and a TTL pushed back up between scans is seen as a re-arm (natural countdown is not)."""

from __future__ import annotations

import pytest

from bot.core import tenures
from bot.core.layouts import COUNTER_IDENTITY
from bot.core.model import Layout, Recognized, Snapshot, Tenure
from bot.core.tenures import REARM_SLACK_MS, decode, encode, identity_digest, track

T0 = 1_767_225_600_000


def snap(at_ms: int, pttl: int, key: bytes = b"lock:a") -> Snapshot:
    return Snapshot(key=key, type="string", pttl_ms=pttl, idle_s=0, observed_ms=at_ms)


def tok(identity: bytes, acquired_ms: int | None = None) -> Recognized:
    return Recognized(Layout.STRING, identity, acquired_ms=acquired_ms)


def counter(n: int) -> Recognized:
    return Recognized(Layout.COUNTER, COUNTER_IDENTITY, counter=n)


def test_first_sight_starts_a_lease_now() -> None:
    tenure = track(None, snap(T0, 60_000), tok(b"t1"))
    assert tenure.first_seen_ms == T0
    assert tenure.observations == 1
    assert tenure.rearms == 0
    assert tenure.last_rearm_ms is None
    assert tenure.max_pttl_ms == 60_000


def test_first_sight_uses_the_time_the_value_carries() -> None:
    tenure = track(None, snap(T0, -1), tok(b"t1", acquired_ms=T0 - 3_600_000))
    assert tenure.first_seen_ms == T0 - 3_600_000


def test_acquisition_time_in_the_future_is_ignored() -> None:
    """A holder clock ahead of the server's must not make a negative age."""
    tenure = track(None, snap(T0, -1), tok(b"t1", acquired_ms=T0 + 60_000))
    assert tenure.first_seen_ms == T0


def test_same_holder_continues_its_lease() -> None:
    first = track(None, snap(T0, 60_000), tok(b"t1"))
    second = track(first, snap(T0 + 10_000, 50_000), tok(b"t1"))
    assert second.first_seen_ms == T0
    assert second.last_seen_ms == T0 + 10_000
    assert second.observations == 2
    assert second.rearms == 0


def test_new_token_starts_a_new_lease() -> None:
    first = track(None, snap(T0, 60_000), tok(b"t1"))
    second = track(first, snap(T0 + 10_000, 60_000), tok(b"t2"))
    assert second.first_seen_ms == T0 + 10_000
    assert second.observations == 1
    assert second.rearms == 0
    assert second.identity_digest == identity_digest(b"t2")


@pytest.mark.parametrize(
    ("counts", "continues"),
    [
        ((1, 1), True),  # untouched
        ((1, 5), True),  # contenders incremented it
        ((5, 5, 9), True),
        ((5, 1), False),  # DEL then a fresh INCR: a new tenure
        ((9, 3), False),
    ],
)
def test_counter_lease_continues_only_while_the_count_never_goes_down(
    counts: tuple[int, ...], continues: bool
) -> None:
    tenure = track(None, snap(T0, 300_000), counter(counts[0]))
    for i, n in enumerate(counts[1:], start=1):
        tenure = track(tenure, snap(T0 + i * 1000, 300_000 - i * 1000), counter(n))
    assert (tenure.first_seen_ms == T0) is continues
    assert tenure.counter_last == counts[-1]
    if continues:
        assert tenure.counter_start == counts[0]
        assert tenure.counter_grew is (counts[-1] > counts[0])
    else:
        assert tenure.counter_start == counts[-1]
        assert tenure.observations == 1
        assert not tenure.counter_grew


# (id, previous pttl, elapsed ms, pttl now, re-armed?)
REARM_CASES = [
    ("natural countdown", 60_000, 10_000, 50_000, False),
    ("countdown with a little jitter", 60_000, 10_000, 50_000 + REARM_SLACK_MS, False),
    ("pushed back up to full", 60_000, 10_000, 60_000, True),
    ("pushed up just past the slack", 60_000, 10_000, 50_000 + REARM_SLACK_MS + 1, True),
    ("re-armed after the old TTL would have lapsed", 5_000, 10_000, 4_000, True),
    ("no expiry -> expiry added counts as a re-arm", -1, 10_000, 30_000, True),
    ("no expiry stays no expiry", -1, 10_000, -1, False),
    ("expiry removed (PERSIST) is not a re-arm", 60_000, 10_000, -1, False),
]


@pytest.mark.parametrize(
    ("prev_pttl", "elapsed", "pttl", "rearmed"),
    [pytest.param(*c[1:], id=c[0]) for c in REARM_CASES],
)
def test_ttl_rearm_detection(prev_pttl: int, elapsed: int, pttl: int, rearmed: bool) -> None:
    first = track(None, snap(T0, prev_pttl), tok(b"t1"))
    second = track(first, snap(T0 + elapsed, pttl), tok(b"t1"))
    assert second.rearms == (1 if rearmed else 0)
    assert second.last_rearm_ms == (T0 + elapsed if rearmed else None)
    assert second.first_seen_ms == T0  # a re-arm never restarts the tenure


def test_rearms_accumulate_and_the_last_one_is_remembered() -> None:
    tenure = track(None, snap(T0, 30_000), tok(b"t1"))
    tenure = track(tenure, snap(T0 + 10_000, 30_000), tok(b"t1"))  # renewed
    tenure = track(tenure, snap(T0 + 20_000, 20_000), tok(b"t1"))  # counting down
    tenure = track(tenure, snap(T0 + 30_000, 30_000), tok(b"t1"))  # renewed again
    assert tenure.rearms == 2
    assert tenure.last_rearm_ms == T0 + 30_000
    assert tenure.observations == 4
    assert tenure.max_pttl_ms == 30_000


# Leases to round-trip: every optional field set and unset, extreme values.
ROUND_TRIP = [
    track(None, snap(T0, 60_000), tok(b"t1")),
    track(None, snap(T0, -1), tok(b"\x00\xff" * 100, acquired_ms=T0 - 1)),
    track(track(None, snap(T0, 5_000), tok(b"t")), snap(T0 + 9_000, 5_000), tok(b"t")),
    track(track(None, snap(T0, 300_000), counter(1)), snap(T0 + 1, 300_000), counter(7)),
    Tenure(
        first_seen_ms=0,
        last_seen_ms=2**62,
        last_pttl_ms=-2,
        observations=2**31 - 1,
        rearms=0,
        last_rearm_ms=-5,
        max_pttl_ms=2**40,
        counter_start=-(2**62),
        counter_last=2**62,
        identity_digest=identity_digest(b""),
    ),
]


@pytest.mark.parametrize("tenure", ROUND_TRIP)
def test_encode_decode_round_trip(tenure: Tenure) -> None:
    record = encode(tenure)
    assert len(record) == 82
    assert record[0] == 2  # the format version comes first
    assert decode(record) == tenure
    assert decode(record[1:]) == tenure  # version 1 (the bare body) is still read


@pytest.mark.parametrize("version", [0, 1, 3, 255])
def test_a_record_of_an_unknown_version_is_dropped_on_purpose(version: int) -> None:
    record = bytes([version]) + encode(ROUND_TRIP[0])[1:]
    assert decode(record) is None


@pytest.mark.parametrize("record", [None, b"", b"garbage", b"\x00" * 80, b"\x00" * 82])
def test_unreadable_record_starts_a_new_lease(record: bytes | None) -> None:
    assert decode(record) is None
    tenure = track(decode(record), snap(T0, 1000), tok(b"t"))
    assert tenure.observations == 1


def test_decoded_record_continues_the_lease() -> None:
    """What the engine does across scans: encode, store, decode, track."""
    first = track(None, snap(T0, 60_000), tok(b"t1"))
    second = track(tenures.decode(tenures.encode(first)), snap(T0 + 1000, 59_000), tok(b"t1"))
    assert second.first_seen_ms == T0
    assert second.observations == 2
