"""Cases, approvals and the audit log for terminals and scripts (pure): what `lockguard cases`,
`approve`, `reject` and `audit` print, and the commands to run next (dry run, then for real)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from bot.cases.audit import AuditEntry
from bot.cases.case import Case, State
from bot.core.clock import text_utc
from bot.core.display import duration, key_text, ttl
from bot.core.invocation import command

if TYPE_CHECKING:
    from bot.cases.approval import ApprovalReport


def _when(ms: int | None) -> str:
    return text_utc(ms) if ms else "-"


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
        # how it was decided; null while pending (the approver's LOCKGUARD_DRY_RUN decides)
        "dry_run": case.dry_run if case.decided_ms else None,
        "lock_count": case.lock_count,
        "locks_shown": len(case.locks),
        "locks": [lk.to_json() for lk in case.locks],
        "outcome_counts": case.outcome_counts,
        "outcomes": list(case.outcomes),
    }


def case_text(case: Case, now_ms: int, show: int = 10) -> str:
    state = case.effective_state(now_ms)
    words = case.state_text(now_ms)
    if state is State.APPROVED and case.dry_run:
        words = "approved in dry run (closed, nothing released)"
    lines = [f"case {case.id}: {words}, {case.lock_count} lock(s), opened {_when(case.created_ms)}"]
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
            f"ttl {ttl(lk.ttl_ms):>6}  {lk.layout.value:<18} {key_text(lk.key, lk.big, 60)}{tail}"
        )
    if show and case.lock_count > min(show, len(case.locks)):
        lines.append(
            f"  ... and {case.lock_count - min(show, len(case.locks))} more lock(s): "
            f"`{command()} cases {case.id}` lists every one"
        )
    return "\n".join(lines)


def for_real() -> str:
    """The command that releases for real, whatever `.env` says (the environment wins over it)."""
    return f"LOCKGUARD_DRY_RUN=false {command()} approve"


def approve_hint(case_id: str, dry_run: bool) -> list[str]:
    """What to run to decide a pending case, as `lockguard scan` prints it."""
    lg = command()
    reject = f"reject: {lg} reject {case_id} --by NAME --reason TEXT"
    if not dry_run:
        return [f"approve: {lg} approve {case_id} --by NAME   {reject}"]
    return [
        f"approve in dry run (LOCKGUARD_DRY_RUN=true, releases nothing): {lg} approve "
        f"{case_id} --by NAME   {reject}",
        f"release for real: {for_real()} {case_id} --by NAME",
    ]


def for_real_hint(approver: str) -> list[str]:
    """After a dry-run approval, which closes its case: a new scan, then approve for real."""
    return [
        "to release for real: a dry-run approval closes its case; a new scan opens a new case "
        "of the locks still abandoned, to be approved with dry run off:",
        f"  {command()} scan",
        f"  {for_real()} <the case id that scan prints> --by {approver}",
    ]


def approval_text(rep: ApprovalReport, show: int = 50) -> str:
    if rep.waiting:
        who = ", ".join(a for a, _ in rep.case.approvals)
        return (
            f"case {rep.case.id}: approval by {who} recorded; it needs another person's "
            f"approval before any lock is released (LOCKGUARD_REQUIRED_APPROVALS)"
        )
    if rep.dry_run:
        head = " in DRY RUN (LOCKGUARD_DRY_RUN=true): no lock was touched, nothing published"
    elif rep.total and not rep.released:
        head = f": 0 of {rep.total} lock(s) released (none deleted; why, lock by lock, below)"
    else:
        head = f": {rep.released} of {rep.total} lock(s) released"
    lines = [f"case {rep.case.id} approved by {rep.case.decided_by}{head}"]
    if not rep.dry_run:
        lines.append(
            "  "
            + ", ".join(f"{n} {name}" for name, n in sorted(rep.counts.items()))
            + f"; case {rep.case.state_text(rep.case.decided_ms or 0)}"
        )
    for o in rep.outcomes[:show]:
        lines.append(f"  {o.outcome:<20} {key_text(o.lock.key, o.lock.big, 60)}  {o.detail}")
        lines.extend(f"  {'':<20} woke waiters: {w}" for w in o.wake)
        if o.event_published:
            lines.append(f"  {'':<20} reclaim event published")
    if rep.total > min(show, len(rep.outcomes)):
        lines.append(
            f"  ... {rep.total - min(show, len(rep.outcomes))} more lock(s): "
            f"`{command()} cases {rep.case.id}` lists every one, `{command()} audit --case "
            f"{rep.case.id}` what was done"
        )
    if rep.dry_run:
        lines.extend(for_real_hint(rep.case.decided_by or "NAME"))
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
    """One audit entry: when, what, the case, who, then each field whole (small objects inline,
    bigger ones as their size, long text cut inside its quotes): never JSON cut in the middle."""
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
