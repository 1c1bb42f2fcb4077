"""`lockguard scan` and `lockguard check` for terminals and scripts (pure): findings as table
rows and JSON objects, why a flagged lock is not in a case yet (and when it will be), the keys that
are not locks, and when the last scan ran."""

from __future__ import annotations

import io
import json
import shutil
import textwrap
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, TextIO

from bot.cases.case import Case
from bot.core.clock import clock_utc, text_utc
from bot.core.display import (
    JSON_TEXT_LIMIT,
    duration,
    escape,
    key_json,
    key_text,
    to_hex,
    ttl,
)
from bot.core.impact import impact_json, impact_words, scored
from bot.core.invocation import command
from bot.core.model import FINDING_REASONS, RELEASABLE_REASONS, BigKey, Finding, Layout, Reason
from bot.core.waitfor import cycle_text
from bot.report.case_text import case_json
from bot.scan.result import ScanResult

if TYPE_CHECKING:
    from bot.engine import Status


def finding_json(f: Finding) -> dict[str, Any]:
    """The `scan --json` shape of one finding: text fields escaped, hex exact."""
    out: dict[str, Any] = {
        **key_json(f.key, f.big),
        "type": f.type,
        "layout": f.layout.value,
        "reason": f.reason.value,
        "ttl_ms": f.ttl_ms,
        "held_seconds": round(f.held_seconds, 3),
        "idle_seconds": f.idle_seconds,
        "identity": escape(f.identity, JSON_TEXT_LIMIT),
        "identity_hex": to_hex(f.identity),
        "owner": f.owner,
        "observations": f.observations,
        "ttl_rearms": f.rearms,
        "releasable": f.releasable,
        "impact": impact_json(f.impact),
    }
    if f.note:
        out["note"] = f.note
    if f.renewal:
        out["renewal"] = f.renewal
    if f.counter is not None:
        out["counter"] = f.counter
    if f.cycle:
        out["cycle"] = [
            {
                "key": escape(k, JSON_TEXT_LIMIT),
                "key_hex": to_hex(k),
                "holder": escape(h, JSON_TEXT_LIMIT),
            }
            for k, h in f.cycle
        ]
    return out


def scan_json_head(result: ScanResult, case: Case | None, endpoint: str) -> dict[str, Any]:
    """The `scan --json` object without its findings: the scan's summary, `case` (the case this
    scan opened, or null) and `redis` (the endpoint, never a password). `findings` comes last."""
    head = result.summary()
    head["case"] = case_json(case, result.server_time_ms) if case else None
    head["redis"] = endpoint
    others = result.by_reason.get(Reason.NOT_A_LOCK, 0)
    head["not_a_lock_keys"] = [not_a_lock_json(f) for f in result.not_locks]
    head["not_a_lock_keys_truncated"] = max(others - len(result.not_locks), 0)
    return head


def not_a_lock_json(f: Finding) -> dict[str, Any]:
    """A key under a lock pattern that is no lock, for `scan --json`: `note` says why."""
    return {
        **key_json(f.key, f.big),
        "type": f.type,
        "layout": f.layout.value,
        "ttl_ms": f.ttl_ms,
        "note": f.note,
    }


def write_scan_json(out: TextIO, head: Mapping[str, Any], finding_lines: Iterable[str]) -> None:
    """Stream the `scan --json` object to `out`: `head` (`scan_json_head`), then `findings`, one
    already-encoded `finding_json` a line, so however many there are memory stays flat."""
    out.write("{")
    for k, v in head.items():
        out.write(f"{json.dumps(k)}: {json.dumps(v)}, ")
    out.write('"findings": [')
    first = True
    for line in finding_lines:
        out.write(("" if first else ",") + "\n  " + line.rstrip("\n"))
        first = False
    out.write("\n]}\n")


#: Said in `owner_evidence` of a finding whose evidence was not read (beyond the kept ones).
NOT_EXAMINED = "not read: only the worst findings a scan keeps are examined"


class RankedFindings:
    """`scan --json`'s findings by score with memory flat: `add` spools each finding's line;
    `lines` yields the kept findings (their evidence read) first, then the rest by score."""

    def __init__(self, spool: IO[bytes]) -> None:
        self.spool = spool
        self.scores = array("d")
        self.offsets = array("q")
        self.hashes = array("q")
        self._end = 0

    def add(self, f: Finding) -> None:
        impact = scored(f.reason, f.held_seconds, owner_evidence=NOT_EXAMINED)
        line = (json.dumps({**finding_json(f), "impact": impact_json(impact)}) + "\n").encode()
        self.spool.write(line)
        self.scores.append(impact.score)
        self.offsets.append(self._end)
        self.hashes.append(hash(f.key))
        self._end += len(line)

    def lines(self, kept: Sequence[Finding]) -> Iterator[str]:
        ranked = [f for f in kept if f.reason in FINDING_REASONS]
        for f in ranked:
            yield json.dumps(finding_json(f))
        shown = {f.key for f in ranked}
        shown_hashes = {hash(k) for k in shown}
        for i in sorted(range(len(self.scores)), key=self.scores.__getitem__, reverse=True):
            self.spool.seek(self.offsets[i])
            line = self.spool.readline().decode()
            if self.hashes[i] in shown_hashes and _line_key(line) in shown:
                continue
            yield line


def _line_key(line: str) -> bytes:
    """The key a spooled line is about (an oversized key's `BigKey.name`)."""
    d = json.loads(line)
    if "key_hex" in d:
        return bytes.fromhex(d["key_hex"])
    return BigKey(
        bytes.fromhex(d["key_head_hex"]), bytes.fromhex(d["key_tail_hex"]), d["key_bytes"]
    ).name


def scan_json(
    result: ScanResult,
    case: Case | None,
    endpoint: str,
    findings: Sequence[Finding] | None = None,
    *,
    limit: int,
) -> dict[str, Any]:
    """The `scan --json` object in memory, for the webhook: at most `limit` findings, worst first,
    and `findings_truncated`, how many more the scan found."""
    if findings is None:
        findings = [f for f in result.worst if f.reason in FINDING_REASONS]
    shown = [finding_json(f) for f in findings[: max(limit, 0)]]
    return {
        **scan_json_head(result, case, endpoint),
        "findings": shown,
        "findings_truncated": max(result.findings - len(shown), 0),
    }


def _layout_cell(f: Finding) -> str:
    if f.layout is Layout.COUNTER and f.counter is not None:
        return f"counter (n={f.counter})"
    return f.layout.value


def offer_ms(f: Finding, threshold_s: int) -> int | None:
    """When a flagged lock that waits only for the threshold has been held past it (server ms),
    else None: from then on, the next scan offers it for release."""
    if f.releasable or f.reason not in RELEASABLE_REASONS or f.held_seconds >= threshold_s:
        return None
    if f.layout is Layout.OTHER or f.partial:
        return None
    return f.observed_ms + int((threshold_s - f.held_seconds) * 1000)


def lock_note(f: Finding, threshold_s: int | None, now_ms: int) -> str:
    """The table's NOTE: why a key is not a lock, why a flagged lock is not offered for release
    (and when it will be), or "" when there is nothing to say."""
    if f.reason is Reason.NOT_A_LOCK:
        return f.note
    if f.reason is Reason.DEADLOCK:
        return f"{cycle_text(f.cycle, key_limit=48)}; {f.note}"
    if f.reason is Reason.LONG_HELD_RENEWING:
        return "never offered: " + (f.renewal or "its owner keeps renewing it")
    at = offer_ms(f, threshold_s) if threshold_s is not None else None
    if at is not None and threshold_s is not None:
        past = duration(threshold_s)
        return f"offered by the first scan after {clock_utc(at, now_ms)}, once held {past}"
    if f.reason in RELEASABLE_REASONS and not f.releasable and f.note:
        return f"not offered: {f.note}"
    return f.renewal


def _row(f: Finding, threshold_s: int | None, now_ms: int) -> tuple[str, ...]:
    return (
        f.reason.value,
        duration(f.held_seconds) + ("" if f.observations > 1 else "*"),
        ttl(f.ttl_ms),
        duration(f.idle_seconds) if f.idle_seconds >= 0 else "?",
        _layout_cell(f),
        key_text(f.key, f.big, 48),
        f.owner[:60] or "-",
        impact_words(f.impact, f.layout) or "-",
        lock_note(f, threshold_s, now_ms),
    )


def table(
    result: ScanResult,
    endpoint: str,
    patterns: list[str],
    limit_note: bool = True,
    *,
    threshold_seconds: int | None = None,
    width: int | None = None,
) -> str:
    """The `lockguard scan` table, worst first. With `width` (a terminal's) it fits it, long
    cells wrapped (`fitted`); without, one line per row, for pipes, logs and scripts."""
    others = result.by_reason.get(Reason.NOT_A_LOCK, 0)
    head = f"lockguard scan of {endpoint}: {result.scanned - others} lock(s)"
    if others:
        head += f" and {others} key(s) that are not locks"
    lines = [head + f" matching {', '.join(patterns)} in {result.duration_seconds:.2f}s"]
    if not result.worst:
        lines += ["no locks found", *filter(None, [result.oversized_words(), result.paced_words()])]
        return "\n".join(lines)
    rows: list[tuple[str, ...]] = [
        ("VERDICT", "HELD", "TTL", "IDLE", "LAYOUT", "KEY", "OWNER", "IMPACT", "NOTE")
    ]
    rows += [_row(f, threshold_seconds, result.server_time_ms) for f in result.worst]
    lines += fitted(rows, width) if width else _plain(rows)
    shown = len(result.worst)
    if result.scanned > shown and limit_note:
        lines.append(f"... {result.scanned - shown} more key(s) not shown (use --limit or --json)")
    counts = ", ".join(
        f"{result.by_reason[r]} {r.value}" for r in Reason if result.by_reason.get(r)
    )
    lines.append(f"verdicts: {counts}; oldest held {duration(result.oldest_held_seconds)}")
    if any(f.observations <= 1 for f in result.worst):
        lines.append("* first seen this scan: its age is what the value says, or 0")
    lines += filter(None, [result.oversized_words(), result.paced_words()])
    return "\n".join(lines)


def terminal_width(out: TextIO) -> int | None:
    return shutil.get_terminal_size().columns if out.isatty() else None


def _plain(rows: list[tuple[str, ...]]) -> list[str]:
    """One line per row, columns padded to the widest cell (the last, NOTE, left ragged)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return [
        ("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1]).rstrip()
        for r in rows
    ]


#: The columns that get the room the short ones leave on a terminal (shares), wrapped in it.
_WRAPPED = {"KEY": 3, "OWNER": 2}
#: Kept whole: a duration or a TTL cut in two reads as two.
_WHOLE = frozenset({"HELD", "TTL", "IDLE"})


def fitted(rows: list[tuple[str, ...]], width: int) -> list[str]:
    """`rows` (a header first, NOTE last) as a plain-text Rich table of at most `width` columns,
    each distinct NOTE a numbered footnote under it."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    width = max(width, 60)
    notes: dict[str, int] = {}
    grid = Table(
        box=None, pad_edge=False, show_edge=False, padding=(0, 1 if width < 120 else 2, 0, 0)
    )
    grid.add_column("", no_wrap=True)
    for name in rows[0][:-1]:
        grid.add_column(name, overflow="fold", ratio=_WRAPPED.get(name), no_wrap=name in _WHOLE)
    for *cells, note in rows[1:]:
        ref = f"({notes.setdefault(note, len(notes) + 1)})" if note else ""
        grid.add_row(Text(ref), *(Text(c) for c in cells))  # Text: "[b]" in a key is no markup
    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
    with console.capture() as captured:
        console.print(grid)
    lines = [line.rstrip() for line in captured.get().splitlines()]
    for note, n in notes.items():
        lines += textwrap.wrap(
            note, width, initial_indent=f"({n}) ", subsequent_indent=" " * (len(str(n)) + 3)
        )
    return lines


@dataclass(slots=True)
class Offers:
    """Why a scan's flagged locks are not in a case (yet), counted over every finding of the
    scan (`add` is its `on_finding`), not only the rows the table shows."""

    threshold_s: int
    waiting: int = 0  # held less than the threshold so far: a later scan offers them
    first_ms: int = 0  # when the first of them is held past it
    last_ms: int = 0
    renewing: int = 0  # long_held_renewing: never offered
    refused: int = 0  # a releasable verdict on what no compare-and-delete can prove
    offerable: int = 0

    def add(self, f: Finding) -> None:
        at = offer_ms(f, self.threshold_s)
        if at is not None:
            self.waiting += 1
            self.first_ms = min(self.first_ms or at, at)
            self.last_ms = max(self.last_ms, at)
        elif f.reason is Reason.LONG_HELD_RENEWING:
            self.renewing += 1
        elif f.releasable:
            self.offerable += 1
        elif f.reason in RELEASABLE_REASONS:
            self.refused += 1

    def lines(self, result: ScanResult, case: Case | None, auto_remediate: bool) -> list[str]:
        """Why there is no case (or what is not in it), and when there will be; or nothing."""
        now, parts = result.server_time_ms, []
        past = f"held {duration(self.threshold_s)} (LOCKGUARD_STALE_THRESHOLD_SECONDS)"
        first, last = clock_utc(self.first_ms, now), clock_utc(self.last_ms, now)
        if self.waiting == 1 or (self.waiting and first == last):
            parts.append(
                f"{_flagged(self.waiting)} will be offered for release by the first scan after "
                f"{first}, once {past}"
            )
        elif self.waiting:
            parts.append(
                f"{self.waiting} flagged locks will be offered for release by the first scan "
                f"after each is {past}: the first at {first}, the last at {last}"
            )
        # a renewed lock found in a deadlock is counted as `deadlock` (offered), not as renewed
        renewing = min(self.renewing, result.by_reason.get(Reason.LONG_HELD_RENEWING, 0))
        if renewing:
            parts.append(f"{renewing} lock(s) still renewed by their owner: never offered")
        if self.refused:
            parts.append(f"{self.refused} flagged lock(s) cannot be offered (see NOTE)")
        in_case = int(str(result.proposal.get("already_in_a_live_case", 0) or 0))
        if in_case:
            parts.append(f"{in_case} lock(s) already in an open case (`{command()} cases`)")
        if self.offerable and not auto_remediate:
            parts.append(
                f"{self.offerable} lock(s) could be offered, but auto-remediation is off "
                "(LOCKGUARD_AUTO_REMEDIATE=false)"
            )
        if not parts:
            return []
        lead = "no case opened" if case is None else f"not in case {case.id}"
        return [f"{lead}: " + "; ".join(parts)]


def _flagged(n: int) -> str:
    return f"{n} flagged lock" + ("" if n == 1 else "s")


def check_text(status: Status, limit_s: float | None, schedule: str) -> str:
    """`lockguard check`: Redis, and when the last scan ran (UTC time and age) and whether scans
    are overdue: none completed within `limit_s` (twice the `schedule`'s interval; None: off)."""
    lines = [f"redis: ok ({status.endpoint}, redis_version {status.redis_version})"]
    last, now = status.last_scan, status.server_time_ms
    at = _summary_int(last, "server_time_ms") if last else 0
    if last is None:
        lines.append("last scan: none recorded yet")
    else:
        others = _summary_int(last.get("by_reason"), Reason.NOT_A_LOCK.value)
        lines.append(
            f"last scan: {_summary_int(last, 'scanned') - others} lock(s), "
            f"{_summary_int(last, 'finding_count')} finding(s)"
            + (f" (and {others} key(s) that are not locks)" if others else "")
            + (f", at {text_utc(at)} ({duration(max(now - at, 0) / 1000)} ago)" if at else "")
        )
    if limit_s is None:
        lines.append("scans: not scheduled (LOCKGUARD_SCAN_SCHEDULE=off): none can be overdue")
        return "\n".join(lines)
    plan = f"schedule {schedule}; overdue after {duration(limit_s)} without a scan"
    if at and now - at <= limit_s * 1000:
        lines.append(f"scans: on time ({plan})")
    elif not at and not status.serving:
        # a Redis lockguard has never scanned and no `serve` watches: nothing is late yet
        lines.append(
            f"scans: none yet and no `lockguard serve` running ({plan}): `{command()} scan` runs "
            f"one now, `{command()} serve` runs LOCKGUARD_SCAN_SCHEDULE"
        )
    else:
        silent = (
            f"no scan has completed for {duration((now - at) / 1000)}"
            if at
            else "no scan recorded yet"
        )
        lines.append(
            f"scans: OVERDUE: {silent} ({plan}; `lockguard serve` runs LOCKGUARD_SCAN_SCHEDULE)"
        )
    return "\n".join(lines)


def _summary_int(summary: object, name: str) -> int:
    value = summary.get(name) if isinstance(summary, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
