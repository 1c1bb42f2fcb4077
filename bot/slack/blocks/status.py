"""The answers to `/lockguard status`, `/lockguard cases` and `/lockguard help`, for one Redis
and for a fleet (a line per target, at most `MAX_LISTED`; the rest are counted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.cases.case import Case, State
from bot.core.display import duration
from bot.slack.blocks.case_message import case_line
from bot.slack.blocks.guard import GuardSnapshot, schedule_blocks
from bot.slack.blocks.kit import (
    BUDGET,
    MESSAGE_BLOCKS,
    Block,
    Message,
    blocks_size,
    context,
    fields,
    header,
    message,
    pack,
    section,
    sections,
)
from bot.slack.blocks.text import OWNER_LIMIT, code, count, date, plain, redis_text
from bot.store.scans import HEARTBEAT_MS

if TYPE_CHECKING:
    from bot.engine import Status

#: Cases still to be finished: shown by `/lockguard status`.
_OPEN = (State.OPENING, State.PENDING, State.APPROVED, State.INCOMPLETE)
#: Targets `/lockguard status` lists at most; the others are counted.
MAX_LISTED = 60


def is_open(case: Case, now_ms: int) -> bool:
    """Still to be decided or finished; a dry-run approval is final, not open."""
    state = case.effective_state(now_ms)
    return state in _OPEN and not (state is State.APPROVED and case.dry_run)


def status_message(
    status: Status, cases: list[Case], *, now_ms: int, guard: GuardSnapshot | None = None
) -> Message:
    """`/lockguard status`; with `guard`, the schedules, which replica runs them, late watches."""
    last = status.last_scan or {}
    if last:
        when = int(str(last.get("server_time_ms", 0) or 0))
        scan = (
            f"{date(when) if when else 'time unknown'}: "
            f"{int(str(last.get('scanned', 0))):,} keys, "
            f"{int(str(last.get('finding_count', 0))):,} flagged, oldest held "
            f"{duration(float(str(last.get('oldest_held_seconds', 0))))}"
        )
    else:
        scan = "none recorded yet"
    beat = (
        f"a scan completed in the last {duration(HEARTBEAT_MS / 1000)}"
        if status.heartbeat_alive
        else f"no scan completed in the last {duration(HEARTBEAT_MS / 1000)}"
    )
    blocks: list[Block] = [
        header("lockguard status"),
        # the version is Redis content (INFO), escaped and cut like a key
        fields(
            f"*Redis*\n{code(status.endpoint)} "
            f"(version {redis_text(status.redis_version, OWNER_LIMIT)})",
            f"*Server time*\n{date(status.server_time_ms)}",
            f"*Last scan*\n{scan}",
            f"*Heartbeat*\n{beat}",
        ),
    ]
    if guard is not None:
        blocks += schedule_blocks(guard, now_ms)
    live = [c for c in cases if is_open(c, now_ms)]
    head = section(f"*Open cases*: {len(live):,}" if live else "*Open cases*: none")
    dry = sum(1 for c in cases if c.effective_state(now_ms) is State.APPROVED and c.dry_run)
    tail = [
        section(
            f"*Approved (dry run)*: {count(dry, 'recent case')}, closed with nothing "
            "released; a new scan offers their locks again (`/lockguard cases`)"
        )
    ][: 1 if dry else 0]
    lines = (case_line(c, now_ms) for c in live)
    body, used = pack(
        lines,
        budget=BUDGET - blocks_size([*blocks, head, *tail]) - 300,
        max_blocks=MESSAGE_BLOCKS - len(blocks) - len(tail) - 2,
    )
    blocks += [head, *body]
    if len(live) > used:
        blocks.append(context(f"…and {len(live) - used:,} more: `/lockguard cases`"))
    blocks += tail
    return message(f"lockguard status: {status.endpoint}, {count(len(live), 'open case')}", blocks)


def cases_message(cases: list[Case], *, now_ms: int) -> Message:
    blocks: list[Block] = [header("lockguard cases")]
    if not cases:
        blocks.append(section("No cases in the retention period."))
        return message("lockguard: no cases", blocks)
    body, used = pack(
        (case_line(c, now_ms) for c in cases),
        budget=BUDGET - blocks_size(blocks) - 300,
        max_blocks=MESSAGE_BLOCKS - 2,
    )
    blocks += body
    if len(cases) > used:
        blocks.append(context(f"…and {len(cases) - used:,} more: `lockguard cases --json`"))
    return message(f"lockguard: {count(len(cases), 'recent case')}", blocks)


def help_message() -> Message:
    return message(
        "lockguard commands: scan [pattern], status, cases, help",
        [
            header("lockguard"),
            section(
                "Finds abandoned Redis locks and releases them when a person approves.\n"
                "`/lockguard scan [pattern]`: scan now and post the findings here; `pattern` "
                "narrows the configured patterns (e.g. `lock:billing:*`)\n"
                "`/lockguard status`: Redis, the last scan, the scheduler and open cases\n"
                "`/lockguard cases`: recent approval cases and what became of them\n"
                "`/lockguard help`: this help"
            ),
            context(
                "A findings message's Approve and Reject buttons decide its case. Nothing is "
                "released without an approval, and nothing at all in dry run."
            ),
        ],
    )


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
    listed = [target_line(t) for t in targets[:MAX_LISTED]]
    down = sum(1 for t in targets if not t.up or t.problem)
    head = f"*Targets*: {len(targets):,}, {down:,} not healthy"
    out = sections(listed, f"{head}\n")
    more = len(targets) - len(listed)
    if more > 0:
        out.append(section(f"…and {more:,} more targets"))
    return out or [section(head)]


@dataclass(frozen=True, slots=True)
class TargetCases:
    name: str
    cases: Sequence[Case]  # its recent cases, newest first (the open ones are listed)
    now_ms: int  # its Redis's time
    problem: str = ""  # its Redis did not answer: why, in lockguard's words

    def open(self) -> list[Case]:
        return [c for c in self.cases if is_open(c, self.now_ms)]


def fleet_cases_message(targets: Sequence[TargetCases]) -> Message:
    """`/lockguard cases` over a fleet: every target's open cases; quiet targets are counted."""
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
