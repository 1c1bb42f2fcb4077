"""Verdicts (pure): a tenure and the latest reading in, one reason code out."""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.model import NO_EXPIRY, RELEASABLE_REASONS, Layout, Reason, Tenure
from bot.core.renewal import SCHEDULES, overdue

# Bound once for classify (once per lock): a member lookup through the enum class costs ~80 ns.
_INFINITE_TTL, _STALE_LEASE, _HEALTHY = Reason.INFINITE_TTL, Reason.STALE_LEASE, Reason.HEALTHY
_KEPT_ALIVE_BY_CONTENDERS, _LONG_HELD_RENEWING = (
    Reason.KEPT_ALIVE_BY_CONTENDERS,
    Reason.LONG_HELD_RENEWING,
)
_COUNTER = Layout.COUNTER
_schedule = SCHEDULES.get  # `bot.core.renewal.schedule`, bound once: classify runs once per lock


@dataclass(frozen=True, slots=True)
class Policy:
    stale_threshold_ms: int
    flag_infinite_ttl: bool = True
    #: LOCKGUARD_LOOSE_RECOGNITION: home-made layouts (any short string, integers without a
    #: TTL, any hash) count as locks too; see `bot.core.layouts`.
    loose_recognition: bool = False


def is_renewing(tenure: Tenure, now_ms: int, policy: Policy) -> bool:
    """A re-arm was seen recently: within a threshold, or within one lease length (a holder that
    renews a 1 h lease every 40 min is renewing even when the last re-arm is 30 min old)."""
    if tenure.last_rearm_ms is None:
        return False
    window = max(policy.stale_threshold_ms, tenure.max_pttl_ms)
    return now_ms - tenure.last_rearm_ms <= window


def classify(tenure: Tenure, pttl_ms: int, layout: Layout, now_ms: int, policy: Policy) -> Reason:
    """The verdict. A lock with a TTL held past the threshold is `stale_lease` only once it is
    proven abandoned:
    - when its library renews on its own (`bot.core.renewal`: python-redis-lock, Redisson,
      BullMQ, redis-semaphore, ShedLock's keep-alive, node-redlock), only once that renewal is
      overdue: its PTTL fell below what a live holder ever lets it reach (with python-redis-lock
      at `expire=60`, under 17 s: 43 s after its last renewal). Until then it is
      `long_held_renewing`, reported and never offered, whatever its lease (30 s to hours);
    - otherwise (the holder's own code renews, if anything does) once seen twice with no re-arm
      within the threshold or one lease length.
    """
    held_ms = now_ms - tenure.first_seen_ms
    old = held_ms >= policy.stale_threshold_ms
    if pttl_ms == NO_EXPIRY:
        if policy.flag_infinite_ttl:
            return _INFINITE_TTL
        # No TTL can be renewed; age alone decides.
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
        # Only one look so far: a renewal cannot have been seen yet. Watch once more before
        # calling a lock with a TTL stale, even when its value says it is old.
        return _HEALTHY
    return _STALE_LEASE


def releasable(
    reason: Reason, layout: Layout, held_ms: int, policy: Policy, *, partial: bool = False
) -> tuple[bool, str]:
    """May a routine approval release a lock with this verdict? And if not, why not (for people).

    A lock with no expiry is flagged on first sight, but offered for release only once it has
    been held past the threshold: seen across scans for that long, or older by the time its
    token carries. A live owner's `timeout=None` lock seen once is never one click from deletion.
    A `deadlock` is offered on first sight (no threshold ends it; `bot.core.waitfor`).
    """
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
