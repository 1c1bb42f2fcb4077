"""`lockguard scan` and `check` over the fleet: every target at once, each with its own Engine (its
state stays in its own Redis), output in the targets' order. Exit 3 when any target could not be
scanned (the others still are), else 1 when any has findings, else 0.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from typing import IO, TextIO

from bot.config import Settings
from bot.core.display import escape
from bot.core.model import Finding
from bot.engine import Engine
from bot.evidence import EVIDENCE_LIMIT
from bot.fleet.results import ScanParts, across, engine_of, write_scans, write_sections
from bot.fleet.target import Target
from bot.report import (
    Offers,
    RankedFindings,
    approve_hint,
    case_text,
    check_text,
    scan_json_head,
    table,
)
from bot.report.scan import terminal_width
from bot.report.terminal import scan_status
from bot.scan import ReadMode

EXIT_OK, EXIT_FINDINGS, EXIT_REDIS = 0, 1, 3
#: Spooled findings kept in memory per scan before they go to disk (8 MB over the fleet).
SPOOL_BYTES = 8 << 20


def _scan_text(
    engine: Engine,
    settings: Settings,
    mode: ReadMode,
    limit: int,
    width: int | None,
    seen: Callable[[Finding], None],
) -> tuple[str, int]:
    """One target's scan as `lockguard scan` prints it, and how many findings."""
    offers = Offers(settings.stale_threshold_seconds)

    def found(finding: Finding) -> None:
        offers.add(finding)
        seen(finding)

    result, case = engine.scan("cli", mode=mode, keep=limit, on_finding=found)
    patterns = [escape(p) for p in settings.patterns]
    threshold = settings.stale_threshold_seconds
    lines = [table(result, settings.endpoint, patterns, threshold_seconds=threshold, width=width)]
    lines += offers.lines(result, case, engine.auto_remediate)
    snoozed = result.proposal.get("snoozed_after_rejection", 0)
    if isinstance(snoozed, int) and snoozed:
        lines.append(
            f"{snoozed} releasable lock(s) not proposed again: rejected earlier with the "
            "same holder (LOCKGUARD_REJECT_SNOOZE_SECONDS)"
        )
    if case is not None:
        lines.append("\n" + case_text(case, result.server_time_ms))
        lines += approve_hint(case.id, settings.dry_run)
    return "\n".join(lines), result.findings


def _json_scan(engine: Engine, mode: ReadMode, spool: IO[bytes]) -> ScanParts:
    """One scan, its findings spooled; the worst EVIDENCE_LIMIT have their evidence read."""
    found = RankedFindings(spool)
    result, case = engine.scan("cli", mode=mode, on_finding=found.add, keep=EVIDENCE_LIMIT)
    head = scan_json_head(result, case, engine.endpoint)
    return head, found.lines(result.worst), result.findings


def fleet_scan_json(
    targets: Sequence[Target], mode: ReadMode, concurrency: int, out: TextIO
) -> int:
    """`scan --json`: one object, findings spooled (to disk past 8 MB) so memory stays flat;
    without a targets file, nothing when the scan fails."""
    per_spool = max(256 << 10, SPOOL_BYTES // max(1, len(targets)))
    with ExitStack() as stack:
        spools = {
            t.name: stack.enter_context(
                tempfile.SpooledTemporaryFile(max_size=per_spool, mode="w+b")
            )
            for t in targets
        }
        done = across(
            targets, lambda t: _json_scan(engine_of(t), mode, spools[t.name]), concurrency
        )
        write_scans(out, done)
    failed = any(not o.ok for o in done)
    return EXIT_REDIS if failed else _found(o.value[2] for o in done if o.value is not None)


def fleet_scan_text(
    targets: Sequence[Target], mode: ReadMode, limit: int, concurrency: int, out: TextIO
) -> int:
    width = terminal_width(out)
    where = targets[0].redis if len(targets) == 1 else f"{len(targets)} targets"
    with scan_status(sys.stderr, where) as seen:
        done = across(
            targets,
            lambda t: _scan_text(engine_of(t), t.settings, mode, limit, width, seen),
            concurrency,
        )
    code = write_sections(out, done, lambda v: v[0], "scanned")
    return code or _found(o.value[1] for o in done if o.value is not None)


def _found(findings: Iterable[int]) -> int:
    return EXIT_FINDINGS if any(findings) else EXIT_OK


def _check(engine: Engine, settings: Settings) -> str:
    status = engine.status()
    schedule = settings.scan_schedule_spec
    interval = schedule.interval_seconds()
    return check_text(status, None if interval is None else 2 * interval, schedule.describe())


def fleet_check(targets: Sequence[Target], concurrency: int, out: TextIO) -> int:
    """`check`: a section per target; exit 3 when any cannot be reached."""
    done = across(targets, lambda t: _check(engine_of(t), t.settings), concurrency)
    return write_sections(out, done, lambda v: v, "checked")
