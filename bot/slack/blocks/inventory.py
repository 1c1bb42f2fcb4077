"""The lock inventory of the last scan, in Slack's words: for the digest and the Home tab.

The last scan's summary is JSON from Redis, read defensively: a missing or malformed field is
empty, never an error. The oldest locks include healthy ones: an ageing healthy lock is the
early warning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.core.display import duration, ttl
from bot.core.impact import impact_words
from bot.core.model import Impact, Layout, Reason
from bot.scan.result import AGE_LABELS
from bot.slack.blocks.kit import Listing
from bot.slack.blocks.text import (
    KEY_LIMIT,
    REASON_LABEL,
    code,
    count,
    cut,
    in_order,
    mrkdwn,
    owner_text,
    plain,
    redis_text,
    word,
)

#: The longest bar of the age histogram, in characters (the largest bucket).
BAR_WIDTH = 20
BAR = "█"
#: Room after KEY_LIMIT for the note of a key recorded cut ("…(+12,345 chars)").
_CUT_NOTE = 24
_REASONS = {r.value: REASON_LABEL[r] for r in Reason}


@dataclass(frozen=True, slots=True)
class Inventory:
    """The last scan's summary (`ScanResult.summary()`); a missing or malformed field is empty."""

    scanned: int
    flagged: int
    by_reason: dict[str, int]
    by_layout: dict[str, int]
    by_pattern: dict[str, int]
    histogram: dict[str, int]
    oldest: list[Mapping[str, Any]]
    oldest_held: float
    server_time_ms: int
    duration_seconds: float
    #: None when the record does not keep them (not shown at all).
    worst: list[Mapping[str, Any]] | None = None

    @property
    def locks(self) -> int:
        return max(self.scanned - self.by_reason.get(Reason.NOT_A_LOCK.value, 0), 0)


def _num(value: Any) -> float:
    try:
        n = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return n if math.isfinite(n) else 0.0


def _int(value: Any) -> int:
    return int(_num(value))


def _counts(value: Any) -> dict[str, int]:
    return {str(k): _int(n) for k, n in value.items()} if isinstance(value, Mapping) else {}


def _entries(value: Any) -> list[Mapping[str, Any]]:
    return [e for e in value if isinstance(e, Mapping)] if isinstance(value, list) else []


def inventory(last_scan: Mapping[str, Any] | None) -> Inventory | None:
    if not isinstance(last_scan, Mapping):
        return None
    worst = last_scan.get("worst")
    return Inventory(
        scanned=_int(last_scan.get("scanned")),
        flagged=_int(last_scan.get("finding_count")),
        by_reason=_counts(last_scan.get("by_reason")),
        by_layout=_counts(last_scan.get("by_layout")),
        by_pattern=_counts(last_scan.get("by_pattern")),
        histogram=_counts(last_scan.get("age_histogram")),
        oldest=_entries(last_scan.get("oldest")),
        oldest_held=_num(last_scan.get("oldest_held_seconds")),
        server_time_ms=_int(last_scan.get("server_time_ms")),
        duration_seconds=_num(last_scan.get("duration_seconds")),
        worst=_entries(worst) if isinstance(worst, list) else None,
    )


def _reason_label(value: str) -> str:
    return _REASONS.get(value) or word(value)


def verdict_line(inv: Inventory) -> str:
    names = in_order(inv.by_reason, _REASONS)
    parts = [f"{inv.by_reason[k]:,} {_reason_label(k)}" for k in names if inv.by_reason[k]]
    return cut(" · ".join(parts[:20]) or "no keys", 1500)


def layout_line(inv: Inventory) -> str:
    names = sorted(inv.by_layout, key=lambda k: (-inv.by_layout[k], k))
    parts = [f"{inv.by_layout[k]:,} {word(k)}" for k in names[:20] if inv.by_layout[k]]
    return cut(" · ".join(parts) or "none", 1500)


def histogram(inv: Inventory) -> str:
    counts = [max(inv.histogram.get(label, 0), 0) for label in AGE_LABELS]
    if not any(counts):
        return "_No locks to age._"
    bars = [BAR * (max(round(n * BAR_WIDTH / max(counts)), 1) if n else 0) for n in counts]
    rows = [
        f"{label:<5} {bar:<{BAR_WIDTH}} {n:,}"
        for label, bar, n in zip(AGE_LABELS, bars, counts, strict=True)
    ]
    return "```\n" + mrkdwn("\n".join(rows)) + "\n```"


def shown_key(entry: Mapping[str, Any]) -> str:
    """A key of the summary: its exact bytes (`key_hex`), else its escaped text."""
    try:
        return redis_text(bytes.fromhex(str(entry["key_hex"])))
    except (KeyError, ValueError):
        return code(cut(str(entry.get("key", "")), KEY_LIMIT + _CUT_NOTE))


def lock_line(i: int, entry: Mapping[str, Any]) -> str:
    who = owner_text(str(entry.get("owner") or ""))
    line = (
        f"{i}. {shown_key(entry)} · held *{duration(_num(entry.get('held_seconds')))}* · "
        f"{who} · {_reason_label(str(entry.get('reason', '')))} · "
        f"TTL {ttl(_int(entry.get('ttl_ms')))} · {word(str(entry.get('layout', '')))}"
    )
    said = impact_words(_impact(entry.get("impact")), _layout(entry.get("layout")))
    return line + (f"\n      *{plain(said, 300)}*" if said else "")


def oldest_listing(inv: Inventory | None, why: str = "") -> Listing:
    return Listing(
        f"*Oldest locks* at the last scan, healthy ones included{why}",
        [lock_line(i, e) for i, e in enumerate(inv.oldest, 1)] if inv is not None else [],
        "lock",
        weight=5,
        empty="*Oldest locks*: none, no locks were seen." if inv else "",
    )


def worst_lines(inv: Inventory) -> list[str]:
    worst = sorted(inv.worst or [], key=lambda e: -_score(e.get("impact")))
    return [lock_line(i, e) for i, e in enumerate(worst, 1)]


def worst_listing(inv: Inventory | None) -> Listing:
    lines = worst_lines(inv) if inv is not None else []
    flagged = inv.flagged if inv is not None else 0
    quiet = inv is not None and inv.worst is not None and not lines and not flagged
    return Listing(
        "*Worst now* at the last scan, by impact: who waits, what is queued, is the owner gone",
        lines,
        "flagged lock",
        hint="`/lockguard scan`",
        weight=5,
        total=max(flagged, len(lines)),
        empty="*Worst now*: nothing was flagged at the last scan." if quiet else "",
    )


def _score(value: Any) -> float:
    return _num(value.get("score")) if isinstance(value, Mapping) else 0.0


def _count_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return max(_int(value), 0)


def _impact(value: Any) -> Impact | None:
    if not isinstance(value, Mapping):
        return None
    alive = value.get("owner_alive")
    return Impact(
        waiters=_count_or_none(value.get("waiters")),
        woken=_count_or_none(value.get("woken")),
        backlog=_count_or_none(value.get("backlog")),
        owner_alive=alive if isinstance(alive, bool) else None,
        owner_evidence=str(value.get("owner_evidence") or "")[:300],
        score=_score(value),
    )


def _layout(value: Any) -> Layout | None:
    try:
        return Layout(str(value))
    except ValueError:
        return None


def pattern_lines(inv: Inventory) -> list[str]:
    names = sorted(inv.by_pattern, key=lambda k: (-inv.by_pattern[k], k))
    return [f"{code(cut(p, KEY_LIMIT + 40))} · {count(inv.by_pattern[p], 'key')}" for p in names]
