"""Presentation for terminals and scripts (pure): findings as table rows and as JSON objects."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from bot.cases.audit import AuditEntry
from bot.cases.case import Case, State
from bot.core.clock import text_utc
from bot.core.display import JSON_TEXT_LIMIT, duration, escape, key_json, to_hex, ttl
from bot.core.model import FINDING_REASONS, Finding, Layout, Reason
from bot.scan.result import ScanResult

if TYPE_CHECKING:
    from bot.cases.reclaim import ApprovalReport


def finding_json(f: Finding) -> dict[str, Any]:
    """The `scan --json` shape of one finding: text fields escaped, hex exact."""
    out: dict[str, Any] = {
        **key_json(f.key),
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
    }
    if f.note:
        out["note"] = f.note
    if f.counter is not None:
        out["counter"] = f.counter
    return out


def scan_json_head(result: ScanResult, case: Case | None, endpoint: str) -> dict[str, Any]:
    """The `scan --json` object without its findings: the scan's summary, `case` (the case this
    scan opened, or null) and `redis` (the endpoint, never a password). `findings` comes last."""
    head = result.summary()
    head["case"] = case_json(case, result.server_time_ms) if case else None
    head["redis"] = endpoint
    return head


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


def scan_json(
    result: ScanResult,
    case: Case | None,
    endpoint: str,
    findings: Sequence[Finding] | None = None,
    *,
    limit: int,
) -> dict[str, Any]:
    """The `scan --json` object in memory, for callers that answer with one bounded value (the
    webhook): at most `limit` findings, worst first (by default the scan's kept `worst` locks
    that are findings), and `findings_truncated`, how many more the scan found but left out.
    `finding_count` is always the scan's full count."""
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


def table(result: ScanResult, endpoint: str, patterns: list[str], limit_note: bool = True) -> str:
    lines = [
        f"lockguard scan of {endpoint}: {result.scanned} lock(s) matching "
        f"{', '.join(patterns)} in {result.duration_seconds:.2f}s",
    ]
    if not result.worst:
        lines.append("no locks found")
        return "\n".join(lines)
    rows = [("VERDICT", "HELD", "TTL", "IDLE", "LAYOUT", "KEY", "OWNER")]
    for f in result.worst:
        rows.append(
            (
                f.reason.value,
                duration(f.held_seconds) + ("" if f.observations > 1 else "*"),
                ttl(f.ttl_ms),
                duration(f.idle_seconds) if f.idle_seconds >= 0 else "?",
                _layout_cell(f),
                escape(f.key, 48),
                (f.owner or escape(f.identity, 40))[:60],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
    shown = len(result.worst)
    if result.scanned > shown and limit_note:
        lines.append(f"... {result.scanned - shown} more lock(s) not shown (use --limit or --json)")
    counts = ", ".join(
        f"{result.by_reason[r]} {r.value}" for r in Reason if result.by_reason.get(r)
    )
    lines.append(f"verdicts: {counts}; oldest held {duration(result.oldest_held_seconds)}")
    lines.append("* first seen this scan: its age is what the value says, or 0")
    return "\n".join(lines)


def _when(ms: int | None) -> str:
    if not ms:
        return "-"
    return text_utc(ms)


def case_json(case: Case, now_ms: int) -> dict[str, Any]:
    """A case for scripts: its first `cases.PREVIEW` locks (`locks_shown`), and counts of all."""
    return {
        "case_id": case.id,
        "state": case.effective_state(now_ms).value,
        "created_ms": case.created_ms,
        "expires_ms": case.expires_ms,
        "decided_by": case.decided_by or None,
        "decided_ms": case.decided_ms,
        "decision_reason": case.decision_reason or None,
        "dry_run": case.dry_run,
        "lock_count": case.lock_count,
        "locks_shown": len(case.locks),
        "locks": [lk.to_json() for lk in case.locks],
        "outcome_counts": case.outcome_counts,
        "outcomes": list(case.outcomes),
    }


def case_text(case: Case, now_ms: int, show: int = 10) -> str:
    state = case.effective_state(now_ms)
    lines = [
        f"case {case.id}: {case.state_text(now_ms)}, {case.lock_count} lock(s), opened "
        f"{_when(case.created_ms)}"
    ]
    if state is State.PENDING:
        lines[0] += f", expires in {duration((case.expires_ms - now_ms) / 1000)}"
    if case.decided_by:
        lines.append(
            f"  decided by {case.decided_by} at {_when(case.decided_ms)}"
            + (f": {case.decision_reason}" if case.decision_reason else "")
            + (" (dry run)" if case.dry_run else "")
        )
    if case.outcome_counts:
        lines.append(
            "  outcomes: "
            + ", ".join(f"{n} {name}" for name, n in sorted(case.outcome_counts.items()))
        )
    outcomes = {o.get("key_hex"): o for o in case.outcomes}
    for lk in case.locks[:show]:
        o = outcomes.get(lk.key.hex())
        tail = f" -> {o['outcome']}" if o else ""
        lines.append(
            f"  {lk.reason.value:<26} held {duration(lk.held_seconds):>7}  "
            f"ttl {ttl(lk.ttl_ms):>6}  {lk.layout.value:<18} {escape(lk.key, 60)}{tail}"
        )
    if case.lock_count > min(show, len(case.locks)):
        lines.append(
            f"  ... and {case.lock_count - min(show, len(case.locks))} more lock(s) "
            "(`lockguard cases --json` lists the first "
            f"{len(case.locks)}; every one is in the case)"
        )
    return "\n".join(lines)


def approval_text(rep: ApprovalReport, show: int = 50) -> str:
    if rep.waiting:
        who = ", ".join(a for a, _ in rep.case.approvals)
        return (
            f"case {rep.case.id}: approval by {who} recorded; it needs another person's "
            f"approval before any lock is released (LOCKGUARD_REQUIRED_APPROVALS)"
        )
    head = f"case {rep.case.id} approved by {rep.case.decided_by}" + (
        " in DRY RUN (LOCKGUARD_DRY_RUN=true): no lock was touched, nothing published"
        if rep.dry_run
        else f": {rep.released} of {rep.total} lock(s) released"
    )
    lines = [head]
    if not rep.dry_run:
        lines.append(
            "  "
            + ", ".join(f"{n} {name}" for name, n in sorted(rep.counts.items()))
            + f"; case {rep.case.state_text(rep.case.decided_ms or 0)}"
        )
    for o in rep.outcomes[:show]:
        lines.append(f"  {o.outcome:<20} {escape(o.lock.key, 60)}  {o.detail}")
        lines.extend(f"  {'':<20} woke waiters: {w}" for w in o.wake)
        if o.event_published:
            lines.append(f"  {'':<20} reclaim event published")
    if rep.total > min(show, len(rep.outcomes)):
        lines.append(
            f"  ... {rep.total - min(show, len(rep.outcomes))} more lock(s): see "
            f"`lockguard audit --case {rep.case.id}`"
        )
    return "\n".join(lines)


#: A text field of an audit entry is shown up to this many characters (then "…").
AUDIT_FIELD_CHARS = 60


def _audit_value(value: Any) -> str:
    """JSON, as `audit --json` has it: every control and non-ASCII character escaped, so a
    value (a reason typed in Slack) cannot drive the terminal."""
    if isinstance(value, str) and len(value) > AUDIT_FIELD_CHARS:
        return json.dumps(value[: AUDIT_FIELD_CHARS - 1])[:-1] + '…"'  # cut inside the quotes
    return json.dumps(value)


def _audit_field(name: str, value: Any) -> str:
    if isinstance(value, Mapping):
        small = len(value) <= 4 and not any(isinstance(v, Mapping | list) for v in value.values())
        inner = ", ".join(f"{k}={_audit_value(v)}" for k, v in value.items())
        return f"{name}: {{{inner}}}" if small else f"{name}: {len(value)} fields"
    if isinstance(value, list | tuple):
        plural = "s" if len(value) > 1 else ""
        return f"{name}: {len(value)} item{plural}" if value else f"{name}: none"
    return f"{name}: {_audit_value(value)}"


def audit_line(entry: AuditEntry, who: Callable[[str], str] = str) -> str:
    """One audit entry: when, what, the case and who (`who(actor)`), then each field of its
    data in turn, whole (small objects inline, bigger ones and lists as their size, long text
    shortened inside its quotes; a key's hex left out beside the key): never JSON cut off in
    the middle. `audit --json` has every field in full."""
    actor = f" by {who(entry.actor)}" if entry.actor else ""
    case = f" {entry.case_id}" if entry.case_id else ""
    data = dict(entry.data)
    if "key" in data:
        data.pop("key_hex", None)
    fields = "; ".join(_audit_field(k, v) for k, v in sorted(data.items()))
    return f"{_when(entry.at_ms)}  {entry.event:<13}{case}{actor}  {fields}".rstrip()


def audit_text(entries: list[AuditEntry], who: Callable[[str], str] = str) -> str:
    if not entries:
        return "audit log is empty"
    return "\n".join(audit_line(e, who) for e in entries)
