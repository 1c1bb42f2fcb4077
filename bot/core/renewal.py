"""When a live holder renews its lock (pure): each library's own schedule (the table in
docs/verdicts.md, read from each library's source) and the rule that calls a renewal overdue.

A library that renews on its own keeps a live holder's PTTL above a floor that grows with the
lease length L. lockguard never knows L, only that it is at least the longest PTTL seen of this
holder (M), so a PTTL below `floor(M) - grace(M)` is below `floor(L) - grace(L)`: the renewal was
due and did not come, the only proof short of expiry that the holder is gone. The grace (1 s plus
5% of the renewal interval) lets a renewal run late. Layouts with no schedule renew only when
their holder's code says so: the threshold and the re-arms seen decide (`bot.core.rules`).
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.clock import clock_utc
from bot.core.display import duration
from bot.core.model import Layout, Reason, Tenure

GRACE_MS = 1000
GRACE_SHARE = 0.05


@dataclass(frozen=True, slots=True)
class Schedule:
    """A library's own renewal: a live holder's PTTL stays above `kept * L + kept_ms`."""

    kept: float
    kept_ms: int
    words: str  # "python-redis-lock renews at 2/3 of its lease"

    def floor_ms(self, lease_ms: int) -> float:
        return self.kept * lease_ms + self.kept_ms

    def line_ms(self, lease_ms: int) -> float:
        """The PTTL below which a holder with a lease of `lease_ms` has missed its renewal."""
        floor = self.floor_ms(lease_ms)
        return floor - (GRACE_MS + GRACE_SHARE * (lease_ms - floor))


SCHEDULES: dict[Layout, Schedule] = {
    Layout.PYTHON_REDIS_LOCK: Schedule(1 / 3, 0, "python-redis-lock renews at 2/3 of its lease"),
    Layout.REDISSON: Schedule(2 / 3, 0, "Redisson's watchdog renews at 1/3 of its lease"),
    Layout.REDISSON_RW: Schedule(2 / 3, 0, "Redisson's watchdog renews at 1/3 of its lease"),
    Layout.BULLMQ: Schedule(1 / 2, 0, "a BullMQ worker renews its job lock at 1/2 of its lease"),
    Layout.REDIS_SEMAPHORE: Schedule(0.2, 0, "redis-semaphore refreshes at 4/5 of its lease"),
    Layout.SHEDLOCK: Schedule(1 / 2, 0, "ShedLock's keep-alive extends at 1/2 of its lease"),
    Layout.NODE_REDLOCK: Schedule(0.0, 500, "node-redlock's using() renews 0.5 s before expiry"),
}


def schedule(layout: Layout) -> Schedule | None:
    """The library's own renewal, or None when it renews only when its holder's code says so."""
    return SCHEDULES.get(layout)


def overdue(sched: Schedule, tenure: Tenure, pttl_ms: int) -> bool:
    """A renewal this library makes was due and did not come: the holder is gone."""
    return 0 <= pttl_ms < sched.line_ms(tenure.max_pttl_ms)


def due_ms(sched: Schedule, tenure: Tenure, pttl_ms: int, now_ms: int) -> int:
    """When the PTTL will cross the overdue line if nothing renews it (server ms)."""
    return now_ms + pttl_ms - int(sched.line_ms(tenure.max_pttl_ms))


def said(layout: Layout, tenure: Tenure, pttl_ms: int, now_ms: int, reason: Reason) -> str:
    """One sentence for the approver: which renewal a live holder would have made and whether it
    came, or that this library does not renew on its own; "" where renewal says nothing."""
    if pttl_ms < 0 or reason in (Reason.HEALTHY, Reason.NOT_A_LOCK, Reason.DEADLOCK):
        return ""
    if layout is Layout.COUNTER:
        return ""
    sched = schedule(layout)
    if sched is None:
        return _no_schedule(layout, tenure, pttl_ms, now_ms, reason)
    line = sched.line_ms(tenure.max_pttl_ms)
    renew_by = clock_utc(now_ms + pttl_ms - int(sched.floor_ms(tenure.max_pttl_ms)), now_ms)
    if reason is Reason.STALE_LEASE:
        since = tenure.last_rearm_ms if tenure.last_rearm_ms is not None else tenure.first_seen_ms
        return (
            f"a live holder would have renewed by {renew_by} ({sched.words}); "
            f"none seen since {clock_utc(since, now_ms)}"
        )
    if line <= 0:
        return f"{sched.words}: it cannot be shown abandoned before it expires"
    return (
        f"renewal not due yet ({sched.words}): a live holder renews by {renew_by}; "
        f"offered if none is seen by {clock_utc(due_ms(sched, tenure, pttl_ms, now_ms), now_ms)}"
    )


def _no_schedule(layout: Layout, tenure: Tenure, pttl_ms: int, now_ms: int, reason: Reason) -> str:
    held = max(0, now_ms - tenure.first_seen_ms)
    unknown = layout in (Layout.STRING, Layout.HASH)
    if reason is Reason.LONG_HELD_RENEWING and tenure.last_rearm_ms is not None:
        how = "" if unknown else f" ({layout.value} locks renew only when their code says so)"
        return f"its holder renewed it at {clock_utc(tenure.last_rearm_ms, now_ms)}{how}"
    who = (
        "lockguard does not know which library made this lock; if it renews on its own, "
        "lockguard cannot tell when"
        if unknown
        else f"{layout.value} locks do not renew on their own"
    )
    if tenure.rearms == 0:
        term = f"held {duration(held / 1000)} of a {duration((held + pttl_ms) / 1000)} lease"
    else:
        term = f"held {duration(held / 1000)}, expires in {duration(pttl_ms / 1000)}"
    return f"{who}: the holder may still be working; {term}"
