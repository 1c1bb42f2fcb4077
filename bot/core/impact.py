"""A finding's `Impact`: its score and its words (pure). `None` in a count or in `owner_alive`
means Redis cannot tell, never zero or false; `owner_evidence` says why.

The order (`score`, larger is worse): someone waits or work is queued behind it; then its owner is
provably gone; then the verdict's severity; then how long it has been held.
"""

from __future__ import annotations

from bot.core.model import SEVERITY, Impact, Layout, Reason

#: Layouts whose release wakes the library's own waiters (Redisson's unlock message).
WOKEN_LAYOUTS = frozenset({Layout.REDISSON, Layout.REDISSON_RW})

#: The weights that keep the tiers apart: a tier outweighs any severity, a severity any age
#: (ages are capped below `_AGE_CAP` seconds, over 300 years).
_TIER_WEIGHT = 1e12
_SEVERITY_WEIGHT = 1e10
_AGE_CAP = _SEVERITY_WEIGHT - 1
_WORST_SEVERITY = max(SEVERITY.values())


def score(
    reason: Reason,
    held_seconds: float,
    *,
    waiters: int | None = None,
    backlog: int | None = None,
    owner_alive: bool | None = None,
) -> float:
    tier = (2 if (waiters or backlog) else 0) + (1 if owner_alive is False else 0)
    severity = _WORST_SEVERITY - SEVERITY[reason]  # the worst verdict has SEVERITY 0
    age = min(max(held_seconds, 0.0), _AGE_CAP)
    return tier * _TIER_WEIGHT + severity * _SEVERITY_WEIGHT + age


def scored(
    reason: Reason,
    held_seconds: float,
    *,
    waiters: int | None = None,
    backlog: int | None = None,
    owner_alive: bool | None = None,
    owner_evidence: str = "",
    woken: int | None = None,
) -> Impact:
    return Impact(
        waiters=waiters,
        woken=woken,
        backlog=backlog,
        owner_alive=owner_alive,
        owner_evidence=owner_evidence,
        score=score(
            reason, held_seconds, waiters=waiters, backlog=backlog, owner_alive=owner_alive
        ),
    )


def impact_words(impact: Impact | None, layout: Layout | None = None) -> str:
    """ "5 waiting · 12 queued · owner gone: ...", then (given `layout`) what releasing does for
    those waiting; "" when Redis showed nothing worth saying."""
    if impact is None:
        return ""
    parts = []
    if impact.waiters:
        parts.append(f"{impact.waiters:,} waiting")
    if impact.backlog:
        parts.append(f"{impact.backlog:,} queued")
    if impact.owner_alive is False:
        parts.append("owner gone" + (f": {impact.owner_evidence}" if impact.owner_evidence else ""))
    elif impact.owner_alive is True:
        parts.append(
            "owner seen alive" + (f": {impact.owner_evidence}" if impact.owner_evidence else "")
        )
    said = release_words(impact, layout)
    if said:
        parts.append(said)
    return " · ".join(parts)


def release_words(impact: Impact, layout: Layout | None) -> str:
    """What releasing does for those waiting: Redisson's channel waiters are woken (`woken`);
    every other waiter retries on its own schedule."""
    if not impact.blocking or layout is None:
        return ""
    waiters = impact.waiters or 0
    if layout in WOKEN_LAYOUTS and waiters:
        woken = min(impact.woken or 0, waiters)
        rest = waiters - woken
        if not woken:
            return f"releasing wakes no one: {_count(rest, 'waiter')} {_retry(rest)}"
        more = f"; {rest:,} more {_retry(rest)}" if rest else ""
        return f"releasing wakes {_count(woken, 'waiter')}{more}"
    who = "workers" if layout is Layout.BULLMQ else "waiters"
    return f"lockguard wakes no one: {who} retry on their own schedule"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _retry(n: int) -> str:
    return "retries on its own schedule" if n == 1 else "retry on their own schedule"


def impact_json(impact: Impact | None) -> dict[str, object]:
    i = impact or Impact()
    return {
        "waiters": i.waiters,
        "backlog": i.backlog,
        "owner_alive": i.owner_alive,
        "owner_evidence": i.owner_evidence,
        "score": round(i.score, 3),
    }
