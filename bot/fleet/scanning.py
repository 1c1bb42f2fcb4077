"""`lockguard scan` over the fleet: every target scanned at once (bounded by
LOCKGUARD_TARGET_CONCURRENCY), each with its own Engine, so its lease history and cases stay in its
own Redis; the output in the targets' order, a section per target.

Exit code over the fleet: 3 when any target could not be scanned (the others are still scanned
and reported), else 1 when any target has findings, else 0. `scan_text` and `json_scan` are one
target's scan, also the whole of `scan` without a targets file.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import IO, Any, TextIO

from bot.cases.case import Case
from bot.config import Settings
from bot.core.display import escape
from bot.core.model import Finding
from bot.engine import Engine
from bot.evidence import EVIDENCE_LIMIT
from bot.fleet.results import TargetResult, across, engine_of
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
from bot.report.fleet import (
    error_text,
    fleet_summary,
    target_head,
    target_heading,
    write_fleet_scan_json,
)
from bot.scan import ReadMode
from bot.scan.result import ScanResult

EXIT_OK, EXIT_FINDINGS, EXIT_REDIS = 0, 1, 3
#: Spooled findings kept in memory per scan before they go to disk (8 MB over the fleet).
SPOOL_BYTES = 8 << 20


def scan_text(
    engine: Engine,
    settings: Settings,
    mode: ReadMode,
    limit: int,
    width: int | None = None,
    seen: Callable[[Finding], None] | None = None,
) -> tuple[str, int]:
    """One target's scan as `lockguard scan` prints it (the table, why flagged locks are not
    offered yet, the case and how to approve it); and how many findings."""
    offers = Offers(settings.stale_threshold_seconds)

    def found(finding: Finding) -> None:
        offers.add(finding)
        if seen is not None:
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
    return "".join(line + "\n" for line in lines), result.findings


@dataclass
class JsonScan:
    """One target's `scan --json`: its head (`scan_json_head`), its findings spooled, ranked."""

    head: dict[str, Any]
    found: RankedFindings
    result: ScanResult
    case: Case | None


def json_scan(engine: Engine, mode: ReadMode, spool: IO[bytes]) -> JsonScan:
    """One scan with its findings spooled to `spool` (memory flat however many there are); the
    worst EVIDENCE_LIMIT are kept and their evidence read, the rest follow by score."""
    found = RankedFindings(spool)
    result, case = engine.scan("cli", mode=mode, on_finding=found.add, keep=EVIDENCE_LIMIT)
    return JsonScan(scan_json_head(result, case, engine.endpoint), found, result, case)


def fleet_scan_json(
    targets: Sequence[Target], mode: ReadMode, concurrency: int, out: TextIO
) -> int:
    """`scan --json` with a targets file: `{"targets": [...]}`, one part per target."""
    per_spool = max(256 << 10, SPOOL_BYTES // max(1, len(targets)))
    with ExitStack() as stack:
        spools = {
            t.name: stack.enter_context(
                tempfile.SpooledTemporaryFile(max_size=per_spool, mode="w+b")
            )
            for t in targets
        }
        done = across(targets, lambda t: json_scan(engine_of(t), mode, spools[t.name]), concurrency)
        write_fleet_scan_json(out, (_json_part(o) for o in done))
    return _exit(done, any(o.value is not None and o.value.result.findings for o in done))


def _json_part(o: TargetResult[JsonScan]) -> tuple[dict[str, Any], Any]:
    t = o.target
    if o.value is None:
        return target_head(t.name, t.redis, t.labels, error=str(o.error)), ()
    scan = o.value
    return target_head(t.name, t.redis, t.labels, head=scan.head), scan.found.lines(
        scan.result.worst
    )


def fleet_scan_text(
    targets: Sequence[Target], mode: ReadMode, limit: int, concurrency: int, out: TextIO
) -> int:
    """`scan` with a targets file: a section per target (heading: name, redis, labels), then
    which targets could not be scanned."""
    done = across(targets, lambda t: scan_text(engine_of(t), t.settings, mode, limit), concurrency)
    for o in done:
        t = o.target
        out.write(target_heading(t.name, t.redis, t.labels) + "\n")
        out.write(o.value[0] if o.value is not None else error_text(str(o.error)) + "\n")
        out.write("\n")
    failed = [o.target.name for o in done if not o.ok]
    out.write(fleet_summary([t.name for t in targets], failed) + "\n")
    return _exit(done, any(o.value is not None and o.value[1] for o in done))


def _exit(done: Sequence[TargetResult[Any]], findings: bool) -> int:
    if any(not o.ok for o in done):
        return EXIT_REDIS
    return EXIT_FINDINGS if findings else EXIT_OK


def check_of(engine: Engine, settings: Settings) -> str:
    """`lockguard check` of one target: Redis answers, the last scan, whether scans are
    overdue (by the target's own LOCKGUARD_SCAN_SCHEDULE)."""
    status = engine.status()
    schedule = settings.scan_schedule_spec
    interval = schedule.interval_seconds()
    return check_text(status, None if interval is None else 2 * interval, schedule.describe())


def fleet_check(targets: Sequence[Target], concurrency: int, out: TextIO) -> int:
    """`check` with a targets file: a section per target; exit 3 when any cannot be reached."""
    done = across(targets, lambda t: check_of(engine_of(t), t.settings), concurrency)
    for o in done:
        t = o.target
        out.write(target_heading(t.name, t.redis, t.labels) + "\n")
        out.write((o.value if o.value is not None else error_text(str(o.error))) + "\n\n")
    failed = [o.target.name for o in done if not o.ok]
    out.write(fleet_summary([t.name for t in targets], failed, "checked") + "\n")
    return EXIT_REDIS if failed else EXIT_OK
