"""Verdicts (pure): a tenure and the latest reading in, one reason code out."""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.model import NO_EXPIRY, RELEASABLE_REASONS, Layout, Reason, Tenure
from bot.core.renewal import SCHEDULES, overdue

# Bound once: classify runs once per lock, and an enum member lookup is not free.
_INFINITE_TTL, _STALE_LEASE, _HEALTHY = Reason.INFINITE_TTL, Reason.STALE_LEASE, Reason.HEALTHY
_KEPT_ALIVE_BY_CONTENDERS, _LONG_HELD_RENEWING = (
    Reason.KEPT_ALIVE_BY_CONTENDERS,
    Reason.LONG_HELD_RENEWING,
)
_COUNTER = Layout.COUNTER
_schedule = SCHEDULES.get


@dataclass(frozen=True, slots=True)
class Policy:
    stale_threshold_ms: int
    flag_infinite_ttl: bool = True
    #: LOCKGUARD_LOOSE_RECOGNITION: home-made layouts count as locks too (`bot.core.layouts`).
    loose_recognition: bool = False


def is_renewing(tenure: Tenure, now_ms: int, policy: Policy) -> bool:
    """A re-arm was seen within the threshold or within one lease length, whichever is longer."""
    if tenure.last_rearm_ms is None:
        return False
    window = max(policy.stale_threshold_ms, tenure.max_pttl_ms)
    return now_ms - tenure.last_rearm_ms <= window


def classify(tenure: Tenure, pttl_ms: int, layout: Layout, now_ms: int, policy: Policy) -> Reason:
    """The verdict. A lock with a TTL held past the threshold is `stale_lease` only once proven
    abandoned: when its library renews on its own, once that renewal is overdue
    (`bot.core.renewal`; until then `long_held_renewing`, never offered); otherwise once seen
    twice with no re-arm within the threshold or one lease length."""
    held_ms = now_ms - tenure.first_seen_ms
    old = held_ms >= policy.stale_threshold_ms
    if pttl_ms == NO_EXPIRY:
        if policy.flag_infinite_ttl:
            return _INFINITE_TTL
        return _STALE_LEASE if old else _HEALTHY
    if not old:
        return _HEALTHY
    sched = _schedule(layout)
    if sched is not None:
        return _STALE_LEASE if overdue(sched, tenure, pttl_ms) else _LONG_HELD_RENEWING
    renewing = is_renewing(tenure, now_ms, policy)
    if layout is _COUNTER and renewing and tenure.counter_grew:
        # The Stalwart bug: every failed INCR+EXPIRE re-arms an abandoned lock's TTL.
        return _KEPT_ALIVE_BY_CONTENDERS
    if renewing:
        return _LONG_HELD_RENEWING
    if tenure.observations < 2:
        # A renewal cannot have been seen in one look, even when the value says the lock is old.
        return _HEALTHY
    return _STALE_LEASE


def releasable(
    reason: Reason, layout: Layout, held_ms: int, policy: Policy, *, partial: bool = False
) -> tuple[bool, str]:
    """May a routine approval release it, and if not, why not (for people)? Only once held
    past the threshold (a live owner's lock with no expiry seen once is never one click from
    deletion), except a `deadlock`, offered on first sight."""
    if reason not in RELEASABLE_REASONS:
        return False, ""
    if layout is Layout.OTHER:
        return False, "not a type a lock is kept in"
    if partial:
        return False, (
            "a hash with more fields than lockguard reads: its holders cannot all be proven"
        )
    if reason is Reason.DEADLOCK:
        return True, ""
    if held_ms < policy.stale_threshold_ms:
        return False, (
            f"held {held_ms // 1000}s so far: offered for release once held past the "
            f"{policy.stale_threshold_ms // 1000}s threshold"
        )
    return True, ""
