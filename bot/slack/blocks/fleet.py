"""The fleet in `/lockguard status` and in the fleet's digest (pure).

    targets_blocks([TargetLine("orders", "team=payments", up=True, last_scan_ms=..., ...)])
    fleet_digest_message([TargetDigest("orders", "payments", ...), ...], now_ms=...)

A status line: a target, its labels, whether its Redis answers, its last completed scan, and
whether this replica runs its schedules. The digest groups the targets by their `team` label
(targets without one last, under "no team"), one line each: flagged locks and the oldest held in
its last scan, its pending cases, or what is wrong with it.

Lines are grouped `PER_SECTION` to a section, and at most `MAX_LISTED` are listed (the rest are
counted), so a fleet of any size stays within Block Kit's limits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.cases.case import Case
from bot.core.display import duration
from bot.slack.blocks.case_message import case_line
from bot.slack.blocks.kit import (
    BUDGET,
    MESSAGE_BLOCKS,
    Block,
    Message,
    blocks_size,
    context,
    header,
    message,
    pack,
    section,
)
from bot.slack.blocks.messages import is_open
from bot.slack.blocks.text import count, date, plain, redis_text

#: The team of targets without a `team` label, in the digest.
NO_TEAM = "no team"

#: Target lines in one section (each well under 150 characters: 3,000 per section text).
PER_SECTION = 15
#: Targets listed at most; the others are counted.
MAX_LISTED = 60


@dataclass(frozen=True, slots=True)
class TargetLine:
    name: str
    labels: str  # `team=payments, env=prod`
    up: bool  # its Redis answered the last check
    last_scan_ms: int | None  # the last completed scan, server time
    leading: bool  # this replica runs its schedules
    problem: str = ""  # why it is not healthy, in lockguard's words (`redis: unreachable`)


def target_line(t: TargetLine) -> str:
    labels = f" ({redis_text(t.labels, 80)})" if t.labels else ""
    health = "up" if t.up and not t.problem else f"*{t.problem or 'down'}*"
    scan = f"last scan {date(t.last_scan_ms)}" if t.last_scan_ms else "no scan recorded"
    mine = " · schedules run here" if t.leading else ""
    return f"• {redis_text(t.name, 40)}{labels}: {health}, {scan}{mine}"


def targets_blocks(targets: Sequence[TargetLine]) -> list[Block]:
    """The fleet's section(s) of `/lockguard status`."""
    listed = [target_line(t) for t in targets[:MAX_LISTED]]
    down = sum(1 for t in targets if not t.up or t.problem)
    head = f"*Targets*: {len(targets):,}, {down:,} not healthy"
    out: list[Block] = []
    for start in range(0, len(listed), PER_SECTION):
        lines = "\n".join(listed[start : start + PER_SECTION])
        out.append(section(f"{head}\n{lines}" if start == 0 else lines))
    more = len(targets) - len(listed)
    if more > 0:
        out.append(section(f"…and {more:,} more targets"))
    return out or [section(head)]


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
    """The fleet's digest: a section per team, a line per target (see the module)."""
    teams: dict[str, list[TargetDigest]] = {}
    for t in sorted(targets, key=lambda t: (t.team == "", t.team, t.name)):
        teams.setdefault(t.team or NO_TEAM, []).append(t)
    flagged = sum(_int((t.last_scan or {}).get("finding_count")) for t in targets)
    down = sum(1 for t in targets if t.problem)
    title = f"lockguard digest: {len(targets):,} targets, {flagged:,} flagged locks, {down:,} down"
    blocks: list[Block] = [header(title[:150]), context(f"As of {date(now_ms)}")]
    for team, members in list(teams.items())[:20]:
        lines = [digest_line(t) for t in members[:MAX_LISTED]]
        for start in range(0, len(lines), PER_SECTION):
            chunk = "\n".join(lines[start : start + PER_SECTION])
            head = f"*{redis_text(team, 40)}*\n" if start == 0 else ""
            blocks.append(section(head + chunk))
        if len(members) > len(lines):
            blocks.append(context(f"…and {len(members) - len(lines):,} more targets"))
    if len(teams) > 20:
        blocks.append(context(f"…and {len(teams) - 20:,} more teams"))
    return message(title, blocks[:50])


@dataclass(frozen=True, slots=True)
class TargetCases:
    name: str
    cases: Sequence[Case]  # its recent cases, newest first (the open ones are listed)
    now_ms: int  # its Redis's time
    problem: str = ""  # its Redis did not answer: why, in lockguard's words

    def open(self) -> list[Case]:
        """Its cases still to be decided or finished, as `/lockguard status` counts them (a
        dry-run approval is final: not open)."""
        return [c for c in self.cases if is_open(c, self.now_ms)]


def fleet_cases_message(targets: Sequence[TargetCases]) -> Message:
    """`/lockguard cases` over a fleet: every target's open cases, each line naming its target;
    a target whose Redis did not answer says so in one line; the targets with no open case are
    counted. Within Block Kit's limits however many there are (the rest are counted)."""
    blocks: list[Block] = [header("lockguard cases, every target")]
    lines: list[str] = []
    quiet = 0
    for t in targets:
        name = f"*{redis_text(t.name, 40)}*"
        open_cases = t.open()
        if t.problem:
            lines.append(f"{name} · its Redis did not answer: {plain(t.problem, 200)}")
        elif not open_cases:
            quiet += 1
        lines += [f"{name} · {case_line(c, t.now_ms)}" for c in open_cases]
    total = sum(len(t.open()) for t in targets)
    if not lines:
        blocks.append(section("No open case on any target."))
    body, used = pack(
        lines, budget=BUDGET - blocks_size(blocks) - 600, max_blocks=MESSAGE_BLOCKS - 3
    )
    blocks += body
    if len(lines) > used:
        blocks.append(context(f"…and {len(lines) - used:,} more lines: `lockguard cases --json`"))
    if quiet:
        blocks.append(context(f"{count(quiet, 'target')} with no open case"))
    return message(
        f"lockguard: {count(total, 'open case')} on {count(len(targets), 'target')}", blocks
    )


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
