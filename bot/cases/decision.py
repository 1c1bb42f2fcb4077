"""What every decision on a case shares (the case looked up, who decides checked, the answer
when it was decided already), and `reject`; approving is `bot.cases.approval`."""

from __future__ import annotations

from typing import Any

import redis

from bot.cases import audit
from bot.cases.case import Case, State, check_case_id
from bot.cases.case_store import CaseStore, snooze
from bot.cases.reclaim_config import ReclaimConfig
from bot.core import logs
from bot.core.clock import text_utc
from bot.core.errors import CaseDecidedError, CaseError
from bot.store.scans import server_ms

#: The longest rejection reason taken (the Slack modal's limit is the same).
MAX_TEXT = 500
_log = logs.logger("cases")


def get_case(client: redis.Redis, case_id: str, cfg: ReclaimConfig) -> Case:
    case_id = check_case_id(case_id)
    case = CaseStore(client, retention_ms=cfg.retention_ms).get(case_id)
    if case is None:
        raise CaseError(
            f"no case {case_id} (it may have passed its retention); see `lockguard cases`"
        )
    return case


def check_actor(actor: str) -> str:
    actor = actor.strip()
    if not actor:
        raise CaseError("who decides must be named (--by NAME): it goes in the audit log")
    if len(actor) > 200:
        raise CaseError("the approver's name is over 200 characters")
    if not actor.isprintable():
        raise CaseError("the approver's name has control characters (newline, tab, ...)")
    return actor


def decided_error(store: CaseStore, case_id: str, state: str, verb: str) -> CaseError:
    if state == "missing":
        return CaseError(f"no case {case_id}")
    if state == State.EXPIRED.value:
        return CaseDecidedError(
            f"cannot {verb} case {case_id}: it expired before a decision; "
            "run a new scan to open a fresh case",
            state=state,
        )
    case = store.get(case_id)
    who = f" by {case.decided_by}" if case is not None and case.decided_by else ""
    when = ""
    if case is not None and case.decided_ms:
        when = " at " + text_utc(case.decided_ms)
    hint = ""
    if (
        case is not None
        and state in (State.APPROVED.value, State.INCOMPLETE.value)
        and not case.dry_run
    ):
        hint = (
            f"; its release has not finished: "
            f"`lockguard approve {case_id} --by NAME --resume` completes it"
        )
    return CaseDecidedError(
        f"cannot {verb} case {case_id}: already decided ({state}{who}{when}){hint}",
        state=state,
        decided_by=case.decided_by if case is not None else "",
        decided_ms=case.decided_ms if case is not None else None,
    )


def reject(client: redis.Redis, case_id: str, actor: str, reason: str, cfg: ReclaimConfig) -> Case:
    actor = check_actor(actor)
    reason = reason.strip()
    if not reason:
        raise CaseError("a rejection needs a reason (--reason TEXT): it goes in the audit log")
    if len(reason) > MAX_TEXT:
        raise CaseError(f"the reason is {len(reason)} characters; at most {MAX_TEXT} expected")
    case = get_case(client, case_id, cfg)
    store = CaseStore(client, retention_ms=cfg.retention_ms)
    now = server_ms(client)
    won = store.transition(
        case.id,
        State.PENDING,
        State.REJECTED,
        now,
        decided_by=actor,
        decided_ms=now,
        decision_reason=reason,
    )
    if won != "ok":
        raise decided_error(store, case.id, won, "reject")
    until = now + cfg.reject_snooze_ms
    snooze(store, case.id, until)
    record_decision(
        client,
        case.id,
        actor,
        cfg,
        now,
        {"decision": "rejected", "reason": reason, "snoozed_until_ms": until},
    )
    store.close(case, now)
    audit.append(
        client,
        event="case_closed",
        at_ms=now,
        retention_ms=cfg.retention_ms,
        case_id=case.id,
        data={"state": State.REJECTED.value},
    )
    return store.get(case.id) or case


def record_decision(
    client: redis.Redis,
    case_id: str,
    actor: str,
    cfg: ReclaimConfig,
    now: int,
    data: dict[str, Any],
    **log_only: Any,
) -> None:
    """A decision (rejected, approval_recorded, approved, resumed) in the audit log and as a
    `decision` log line (with `log_only`'s fields too)."""
    audit.append(
        client,
        event="decision",
        at_ms=now,
        retention_ms=cfg.retention_ms,
        case_id=case_id,
        actor=actor,
        data=data,
    )
    logs.event(_log, "decision", case_id=case_id, actor=actor, **data, **log_only)
