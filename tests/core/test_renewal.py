"""The renewal rule (pure): a lock whose library renews on its own is `stale_lease` only once a
renewal is overdue. Simulated holders renew on their library's schedule, scans read them at a
steady cadence, and the real tenure tracker and verdict rule decide, for leases from 30 s to 6 h
at thresholds of 30 s and 900 s."""

from __future__ import annotations

import pytest

from bot.core import renewal, tenures
from bot.core.model import Layout, Reason, Recognized, Snapshot, Tenure
from bot.core.rules import Policy, classify, releasable

T0 = 1_780_000_000_000  # server ms: any fixed time
TOKEN = b"host-1:4242"

# (layout, the share of the lease after which the library renews, a fixed ms before expiry)
RENEWERS = [
    (Layout.PYTHON_REDIS_LOCK, 2 / 3, 0),
    (Layout.REDISSON, 1 / 3, 0),
    (Layout.REDISSON_RW, 1 / 3, 0),
    (Layout.BULLMQ, 1 / 2, 0),
    (Layout.REDIS_SEMAPHORE, 0.8, 0),
    (Layout.SHEDLOCK, 1 / 2, 0),
    (Layout.NODE_REDLOCK, 1.0, 500),
]
LEASES_S = [30, 60, 300, 1350, 3600, 21600]
THRESHOLDS_S = [30, 900]


def interval_ms(lease_ms: int, share: float, before_ms: int) -> int:
    return int(lease_ms * share) - before_ms


class Holder:
    """A lock taken at T0 with a lease of `lease_ms`, renewed every `every_ms` (each renewal
    `late_ms` late) until `dies_ms` after T0 (never: None)."""

    def __init__(self, lease_ms: int, every_ms: int, late_ms: int, dies_ms: int | None) -> None:
        self.lease_ms, self.every_ms, self.late_ms, self.dies_ms = (
            lease_ms,
            every_ms,
            late_ms,
            dies_ms,
        )

    def last_renewal(self, t: int) -> int:
        """The last renewal (or the acquisition) at or before `t` ms after T0."""
        last, n = 0, 1
        while True:
            at = n * (self.every_ms + self.late_ms)
            if at > t or (self.dies_ms is not None and at > self.dies_ms):
                return last
            last, n = at, n + 1

    def pttl(self, t: int) -> int:
        left = self.last_renewal(t) + self.lease_ms - t
        return left if left > 0 else -2


def watch(layout: Layout, holder: Holder, threshold_s: int, every_ms: int, until_ms: int):
    """Scan every `every_ms` (from a phase that is not a multiple of the renewal) until the key
    expires or `until_ms`; yields (t, verdict, offered, tenure)."""
    policy = Policy(stale_threshold_ms=threshold_s * 1000)
    rec = Recognized(layout, TOKEN)
    record: bytes | None = None
    t = 137
    while t <= until_ms:
        pttl = holder.pttl(t)
        if pttl < 0:
            return
        snap = Snapshot(b"lock:job", "string", pttl, 0, T0 + t, value=TOKEN, value_len=len(TOKEN))
        tenure, record = tenures.advance(record, snap, rec)
        reason = classify(tenure, pttl, layout, T0 + t, policy)
        offered, _ = releasable(reason, layout, T0 + t - tenure.first_seen_ms, policy)
        yield t, reason, offered, tenure
        t += every_ms


def cadence(every_ms: int) -> int:
    return max(1000, every_ms // 7)


@pytest.mark.parametrize("threshold_s", THRESHOLDS_S)
@pytest.mark.parametrize("lease_s", LEASES_S)
@pytest.mark.parametrize(("layout", "share", "before_ms"), RENEWERS)
def test_a_live_holder_on_its_library_s_schedule_is_never_offered(
    layout: Layout, share: float, before_ms: int, lease_s: int, threshold_s: int
) -> None:
    lease_ms = lease_s * 1000
    every = interval_ms(lease_ms, share, before_ms)
    for late_ms in (0, 250):  # on time, and each renewal a quarter second late
        for renews_at in (every, every // 2):  # at the library's share, and sooner
            holder = Holder(lease_ms, renews_at, late_ms if renews_at == every else 0, None)
            seen = list(
                watch(layout, holder, threshold_s, cadence(every), 4 * every + 2 * lease_ms)
            )
            assert len(seen) > 8
            assert not [s for s in seen if s[1] is Reason.STALE_LEASE or s[2]], (late_ms, renews_at)
            # past the threshold it is reported, never healthy
            past = [s for s in seen if T0 + s[0] - s[3].first_seen_ms >= threshold_s * 1000]
            assert all(s[1] is Reason.LONG_HELD_RENEWING for s in past)


@pytest.mark.parametrize("threshold_s", THRESHOLDS_S)
@pytest.mark.parametrize("lease_s", LEASES_S)
@pytest.mark.parametrize(("layout", "share", "before_ms"), RENEWERS)
def test_a_dead_holder_is_offered_within_one_renewal_interval_of_its_last_renewal(
    layout: Layout, share: float, before_ms: int, lease_s: int, threshold_s: int
) -> None:
    lease_ms = lease_s * 1000
    every = interval_ms(lease_ms, share, before_ms)
    scan_every = cadence(every)
    dies = 3 * every + 1  # renews three times, then dies
    holder = Holder(lease_ms, every, 0, dies)
    last = holder.last_renewal(dies)
    seen = list(watch(layout, holder, threshold_s, scan_every, 10 * lease_ms))
    offered = [t for t, reason, ok, _ in seen if ok]
    assert all(reason is Reason.STALE_LEASE for t, reason, ok, _ in seen if ok)
    assert all(t > last + every for t in offered)  # never while a renewal could still come
    grace = renewal.GRACE_MS + renewal.GRACE_SHARE * every
    # the bound: one renewal interval and its grace after the last renewal (and the threshold),
    # plus the scans' cadence twice: the longest PTTL seen may be one cadence short of the
    # tenure, and the next scan after that is the one that offers it
    bound = max(last + every + grace, threshold_s * 1000) + 2 * scan_every
    if layout is Layout.NODE_REDLOCK or bound >= last + lease_ms:
        # it expires before any scan could prove it dead: its key goes by itself
        return
    assert offered, f"never offered; the key lived until {last + lease_ms}"
    assert offered[0] <= bound


@pytest.mark.parametrize(("layout", "share", "before_ms"), RENEWERS)
def test_the_overdue_line_never_falls_as_the_lease_grows(
    layout: Layout, share: float, before_ms: int
) -> None:
    """What makes the longest PTTL seen a safe stand-in for the unknown lease length: a shorter
    lease never draws a higher line (node-redlock's line is below zero: never overdue)."""
    sched = renewal.schedule(layout)
    assert sched is not None
    lines = [sched.line_ms(ms) for ms in range(1_000, 30_000_000, 7_919)]
    assert lines == sorted(lines) or max(lines) < 0


def test_python_redis_lock_at_expire_60_numbers() -> None:
    """docs/verdicts.md's example: renews every 40 s, overdue under 17 s left, 43 s after
    renewal."""
    sched = renewal.schedule(Layout.PYTHON_REDIS_LOCK)
    assert sched is not None
    assert sched.line_ms(60_000) == pytest.approx(17_000)


def tenure(first_ms: int, max_pttl_ms: int, rearm_ms: int | None = None) -> Tenure:
    return Tenure(
        first_ms, T0, 0, 2, 0 if rearm_ms is None else 1, rearm_ms, max_pttl_ms, None, None, b""
    )


def test_the_approver_is_told_which_renewal_was_missed() -> None:
    said = renewal.said(
        Layout.PYTHON_REDIS_LOCK, tenure(T0 - 50_000, 60_000), 10_000, T0, Reason.STALE_LEASE
    )
    # first seen 50 s ago at 60 s left, never re-armed: its renewal was due 10 s ago
    assert said.startswith("a live holder would have renewed by ")
    assert "python-redis-lock renews at 2/3 of its lease" in said
    assert said.endswith("none seen since " + renewal.clock_utc(T0 - 50_000, T0))
    assert f"renewed by {renewal.clock_utc(T0 - 10_000, T0)}" in said


def test_a_lock_whose_renewal_is_not_due_says_when_it_will_be() -> None:
    said = renewal.said(
        Layout.PYTHON_REDIS_LOCK, tenure(T0 - 35_000, 60_000), 25_000, T0, Reason.LONG_HELD_RENEWING
    )
    assert said.startswith("renewal not due yet (python-redis-lock renews at 2/3 of its lease)")
    assert f"renews by {renewal.clock_utc(T0 + 5_000, T0)}" in said
    assert f"offered if none is seen by {renewal.clock_utc(T0 + 8_000, T0)}" in said


def test_a_library_that_does_not_renew_by_itself_says_so() -> None:
    said = renewal.said(
        Layout.REDIS_PY, tenure(T0 - 52 * 60_000, 3_600_000), 8 * 60_000, T0, Reason.STALE_LEASE
    )
    assert said == (
        "redis_py locks do not renew on their own: the holder may still be working; "
        "held 52m00s of a 1h00m lease"
    )
    unknown = renewal.said(
        Layout.STRING, tenure(T0 - 120_000, 600_000), 480_000, T0, Reason.STALE_LEASE
    )
    assert unknown.startswith("lockguard does not know which library made this lock")


def test_a_renewal_seen_of_a_library_that_renews_only_when_told_is_named() -> None:
    said = renewal.said(
        Layout.REDIS_PY,
        tenure(T0 - 600_000, 60_000, rearm_ms=T0 - 20_000),
        50_000,
        T0,
        Reason.LONG_HELD_RENEWING,
    )
    assert said == (
        f"its holder renewed it at {renewal.clock_utc(T0 - 20_000, T0)} "
        "(redis_py locks renew only when their code says so)"
    )


def test_node_redlock_cannot_be_shown_abandoned_before_it_expires() -> None:
    said = renewal.said(
        Layout.NODE_REDLOCK,
        tenure(T0 - 3_000_000, 3_600_000),
        600_000,
        T0,
        Reason.LONG_HELD_RENEWING,
    )
    assert "cannot be shown abandoned before it expires" in said


@pytest.mark.parametrize(
    "reason", [Reason.HEALTHY, Reason.NOT_A_LOCK, Reason.DEADLOCK, Reason.INFINITE_TTL]
)
def test_nothing_is_said_where_renewal_does_not_apply(reason: Reason) -> None:
    pttl = -1 if reason is Reason.INFINITE_TTL else 10_000
    assert renewal.said(Layout.REDISSON, tenure(T0 - 60_000, 30_000), pttl, T0, reason) == ""
