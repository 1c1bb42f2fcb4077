"""The digest (`LOCKGUARD_DIGEST_SCHEDULE`): alarms first, the lock inventory, the cases since
the last digest and the guard's own health. Deciders are shown but not mentioned: a daily digest
pings nobody. A fleet's digest is a line per target, grouped by its `team` label.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.cases.case import Case, State
from bot.core.display import duration
from bot.slack.blocks import kit
from bot.slack.blocks.case_message import case_line, case_state, outcomes_text
from bot.slack.blocks.guard import GuardHealth, head_blocks, health_blocks, watch_listing
from bot.slack.blocks.inventory import (
    Inventory,
    inventory,
    oldest_listing,
    pattern_lines,
    worst_listing,
)
from bot.slack.blocks.kit import (
    BUDGET,
    Block,
    Listing,
    Message,
    context,
    fit,
    header,
    message,
    sections,
)
from bot.slack.blocks.text import count, date, plain, redis_text

#: Cases that still need something (a decision, a release, a resume) are listed first.
_ATTENTION = (State.INCOMPLETE, State.PENDING, State.APPROVED, State.OPENING)


def _since(cases: Iterable[Case], since_ms: int | None) -> list[Case]:
    """Cases opened since the last digest, and older ones decided since (what became of them)."""
    return [
        c
        for c in cases
        if since_ms is None
        or c.created_ms > since_ms
        or (c.decided_ms is not None and c.decided_ms > since_ms)
    ]


def _cases_title(
    recent: list[Case], inv: Inventory | None, since_ms: int | None, now_ms: int
) -> str:
    when = f"since the last digest ({date(since_ms)})" if since_ms else "in the retention period"
    flagged = f"The last scan flagged {count(inv.flagged, 'lock')}." if inv is not None else ""
    if not recent:
        return f"*Cases {when}*\nNo case was opened or decided. {flagged}".rstrip()
    states = Counter(case_state(c, now_ms) for c in recent)
    outcomes = sum((Counter(c.outcome_counts) for c in recent), Counter[str]())
    locks = sum(c.total_locks for c in recent)
    text = f"*Cases {when}*: {count(len(recent), 'case')} of {count(locks, 'lock')}: " + " · ".join(
        f"{n:,} {plain(w, 60).lower()}" for w, n in states.most_common(8)
    )
    if outcomes:
        text += f"\nWhat became of their locks: {outcomes_text(outcomes)}"
    return text + (f"\n{flagged}" if flagged else "")


def _listings(
    inv: Inventory | None, health: GuardHealth, recent: list[Case], title: str, now_ms: int
) -> list[Listing]:
    return [
        worst_listing(inv),
        oldest_listing(inv, " (an ageing healthy lock is the early warning)"),
        watch_listing(health.watches),
        Listing(
            title,
            [case_line(c, now_ms, notify=False) for c in recent[:200]],
            "case",
            hint="`/lockguard cases`",
            weight=3,
            total=len(recent),
            empty=title,
        ),
        Listing("*Keys per pattern*", pattern_lines(inv) if inv is not None else [], "pattern"),
    ]


def _fallback(
    inv: Inventory | None, health: GuardHealth, recent: list[Case], endpoint: str, since: bool
) -> str:
    text = (
        f"lockguard has not completed a scan on {endpoint}"
        if inv is None
        else f"lockguard digest for {endpoint}: {count(inv.locks, 'lock')}, {inv.flagged:,} "
        f"flagged, oldest held {duration(inv.oldest_held)}"
    )
    if inv is not None and health.overdue:
        text += "; scans are overdue"
    return (
        text
        + f"; {count(len(recent), 'case')} "
        + ("since the last digest" if since else "in the retention period")
    )


def digest_message(
    last_scan: dict[str, Any] | None,
    cases: list[Case],
    health: GuardHealth,
    *,
    endpoint: str,
    now_ms: int,
    since_ms: int | None,
) -> Message:
    """`since_ms`: the last digest (None: this is the first)."""
    inv = inventory(last_scan)
    top = head_blocks(
        inv, health, endpoint=endpoint, now_ms=now_ms, title=f"lockguard digest: {endpoint}"
    )
    bottom = health_blocks(health, now_ms=now_ms)
    rank = {state: i for i, state in enumerate(_ATTENTION)}
    recent = sorted(
        _since(cases, since_ms),
        key=lambda c: (rank.get(c.effective_state(now_ms), len(rank)), -c.created_ms),
    )
    items = _listings(inv, health, recent, _cases_title(recent, inv, since_ms, now_ms), now_ms)
    body = fit(  # shown: the worst, the oldest, the patterns, the cases, the watches
        items,
        order=(0, 1, 4, 3, 2),
        budget=BUDGET - kit.blocks_size(top + bottom),
        max_blocks=kit.MESSAGE_BLOCKS - len(top) - len(bottom) - 5,
    )
    return message(_fallback(inv, health, recent, endpoint, bool(since_ms)), top + body + bottom)


#: The team of targets without a `team` label.
NO_TEAM = "no team"
#: Targets listed per team at most; the others are counted.
TEAM_LISTED = 60


@dataclass(frozen=True, slots=True)
class TargetDigest:
    name: str
    team: str  # its `team` label ("" when it has none)
    last_scan: Mapping[str, Any] | None  # its `{lockguard}:scan:last` summary
    pending_cases: int
    problem: str = ""  # its Redis did not answer: why, in lockguard's words


def digest_line(t: TargetDigest) -> str:
    name = redis_text(t.name, 40)
    if t.problem:
        return f"• {name}: *{t.problem[:120]}*"
    if not t.last_scan:
        return f"• {name}: no scan recorded yet"
    flagged = _int(t.last_scan.get("finding_count"))
    oldest = duration(float(_int(t.last_scan.get("oldest_held_seconds"))))
    cases = f", {t.pending_cases:,} case{'s' if t.pending_cases != 1 else ''} pending"
    when = _int(t.last_scan.get("server_time_ms"))
    scanned = date(when) if when else "at an unknown time"
    return (
        f"• {name}: {flagged:,} flagged, oldest held {oldest}"
        f"{cases if t.pending_cases else ''} (scanned {scanned})"
    )


def fleet_digest_message(targets: Sequence[TargetDigest], *, now_ms: int) -> Message:
    """A section per team (unlabelled targets last), a line per target."""
    teams: dict[str, list[TargetDigest]] = {}
    for t in sorted(targets, key=lambda t: (t.team == "", t.team, t.name)):
        teams.setdefault(t.team or NO_TEAM, []).append(t)
    flagged = sum(_int((t.last_scan or {}).get("finding_count")) for t in targets)
    down = sum(1 for t in targets if t.problem)
    title = f"lockguard digest: {len(targets):,} targets, {flagged:,} flagged locks, {down:,} down"
    blocks: list[Block] = [header(title[:150]), context(f"As of {date(now_ms)}")]
    for team, members in list(teams.items())[:20]:
        lines = [digest_line(t) for t in members[:TEAM_LISTED]]
        blocks += sections(lines, f"*{redis_text(team, 40)}*\n")
        if len(members) > len(lines):
            blocks.append(context(f"…and {len(members) - len(lines):,} more targets"))
    if len(teams) > 20:
        blocks.append(context(f"…and {len(teams) - 20:,} more teams"))
    return message(title, blocks[:50])


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
