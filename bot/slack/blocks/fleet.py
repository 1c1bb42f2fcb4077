"""The fleet in `/lockguard status` (pure): one line per target, its labels, whether its Redis
answers, its last completed scan, and whether this replica runs its schedules.

    targets_blocks([TargetLine("orders", "team=payments", up=True, last_scan_ms=..., ...)])

Lines are grouped `PER_SECTION` to a section, and at most `MAX_LISTED` are listed (the rest are
counted), so a fleet of any size stays within Block Kit's limits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.slack.blocks.kit import Block, section
from bot.slack.blocks.text import date, redis_text

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
