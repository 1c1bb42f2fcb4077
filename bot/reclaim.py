"""Reclaiming: the engine's steps after a scan. Open a case, decide it, release, verify, announce.

Like `bot.engine`, this knows nothing of Slack, the CLI or the scheduler; they all call these
functions and render what comes back.

Safety, in the order the steps run (DESIGN §3):
1. A case records the exact bytes shown to the human; only those are ever compared and deleted.
2. The decision is one atomic transition (`bot.cases`): a double click or two replicas give one
   winner, and everyone else gets "already decided".
3. Dry run stops after the decision: no lock is touched and nothing is published.
4. Each lock: compare-and-delete (or lock-delay), then verification, then the library's own
   wake-up and one JSON event on the release channel, only for locks actually released.
5. Every step is appended to the audit stream.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis

from bot import audit
from bot.cases import Case, CaseLock, CaseStore, State, check_case_id
from bot.display import escape
from bot.engine import ScanOptions, ScanResult, run_scan
from bot.errors import CaseError
from bot.model import Finding, Layout
from bot.release import Outcome, Releaser, Result, Target
from bot.store import server_ms

MAX_TEXT = 500


@dataclass(frozen=True, slots=True)
class ReclaimConfig:
    dry_run: bool = True
    publish_release_event: bool = True
    release_channel: str = "locks:reclaimed"
    case_ttl_ms: int = 3_600_000
    case_max_locks: int = 50
    lock_delay_ms: int = 0  # 0: delete; >0: shorten the TTL to this instead (lock-delay)
    retention_ms: int = 30 * 86_400_000


@dataclass(frozen=True, slots=True)
class LockOutcome:
    lock: CaseLock
    outcome: str  # an Outcome value, or "dry_run"
    detail: str
    wake: tuple[str, ...] = ()
    event_published: bool = False


@dataclass(frozen=True, slots=True)
class ApprovalReport:
    case: Case
    outcomes: tuple[LockOutcome, ...]
    dry_run: bool

    @property
    def released(self) -> int:
        return sum(1 for o in self.outcomes if o.outcome == Outcome.RELEASED.value)


def record_scan(client: redis.Redis, summary: dict[str, Any], cfg: ReclaimConfig,
                now_ms: int) -> None:
    audit.append(client, event="scan", at_ms=now_ms, retention_ms=cfg.retention_ms,
                 data=summary)


class Candidates:
    """Keeps the worst `limit` releasable findings of a scan as they stream past (flat memory)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._heap: list[tuple[tuple[int, float], int, Finding]] = []
        self._seq = 0

    def add(self, f: Finding) -> None:
        if not f.releasable or self.limit <= 0:
            return
        sev, neg_held = f.sort_key()
        item = ((-sev, -neg_held), self._seq, f)  # the least bad kept is on top
        self._seq += 1
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, item)
        else:
            heapq.heappushpop(self._heap, item)

    @property
    def findings(self) -> list[Finding]:
        return sorted((f for *_, f in self._heap), key=Finding.sort_key)


def scan_and_propose(client: redis.Redis, options: ScanOptions, cfg: ReclaimConfig, *,
                     propose: bool = True, on_finding: Callable[[Finding], None] | None = None,
                     keep: int = 50) -> tuple[ScanResult, Case | None]:
    """The scan tick every entry point runs: scan, audit the summary, and (when `propose`)
    open a case for the releasable findings not already in one."""
    candidates = Candidates(cfg.case_max_locks if propose else 0)

    def seen(f: Finding) -> None:
        candidates.add(f)
        if on_finding is not None:
            on_finding(f)

    result = run_scan(client, options, on_finding=seen, keep=keep)
    record_scan(client, result.summary(), cfg, result.server_time_ms)
    case = open_case(client, candidates.findings, cfg, result.server_time_ms) if propose else None
    return result, case


def open_case(client: redis.Redis, findings: list[Finding], cfg: ReclaimConfig,
              now_ms: int | None = None) -> Case | None:
    """A pending case for the releasable findings (worst first, at most `case_max_locks`) that
    are not already in a live case; None when there is nothing new to decide."""
    candidates = sorted((f for f in findings if f.releasable), key=Finding.sort_key)
    locks = [CaseLock.from_finding(f) for f in candidates[: cfg.case_max_locks]]
    if not locks:
        return None
    now = server_ms(client) if now_ms is None else now_ms
    store = CaseStore(client, retention_ms=cfg.retention_ms)
    case = store.open(locks, now, cfg.case_ttl_ms)
    if case is None:
        return None
    store.save_manifest(case, {
        "evidence": [
            {"key": escape(lk.key), "reason": lk.reason.value, "held_seconds": lk.held_seconds,
             "ttl_ms": lk.ttl_ms, "owner": lk.owner, "counter": lk.counter,
             "layout": lk.layout.value}
            for lk in case.locks
        ],
        "left_out_over_limit": max(0, len(candidates) - cfg.case_max_locks),
    })
    audit.append(client, event="case_opened", at_ms=now, retention_ms=cfg.retention_ms,
                 case_id=case.id, data={
                     "locks": [{"key": escape(lk.key), "key_hex": lk.key.hex(),
                                "reason": lk.reason.value} for lk in case.locks],
                     "expires_ms": case.expires_ms,
                 })
    return case


def get_case(client: redis.Redis, case_id: str, cfg: ReclaimConfig) -> Case:
    case_id = check_case_id(case_id)
    case = CaseStore(client, retention_ms=cfg.retention_ms).get(case_id)
    if case is None:
        raise CaseError(f"no case {case_id} (it may have passed its retention); "
                        "see `lockguard cases`")
    return case


def approve(client: redis.Redis, case_id: str, actor: str, cfg: ReclaimConfig, *,
            resume: bool = False) -> ApprovalReport:
    """Approve a pending case and release its locks. With `resume`, finish the release of a
    case that was approved but whose release never completed (the approver died half-way):
    every step is a compare-and-delete, so locks already released come back `already_gone`."""
    actor = _check_actor(actor)
    case = get_case(client, case_id, cfg)
    store = CaseStore(client, retention_ms=cfg.retention_ms)
    now = server_ms(client)
    if resume:
        if case.state is not State.APPROVED or case.outcomes or case.dry_run:
            raise CaseError(f"case {case.id} has no unfinished release to resume "
                            f"(state {case.effective_state(now).value}"
                            f"{', outcomes recorded' if case.outcomes else ''}"
                            f"{', approved in dry run' if case.dry_run else ''})")
        if cfg.dry_run:
            raise CaseError("dry run is on (LOCKGUARD_DRY_RUN=true): a resumed release would "
                            "touch locks; turn dry run off to resume")
        decision = "resumed"
    else:
        won = store.transition(case.id, State.PENDING, State.APPROVED, now, decided_by=actor,
                               decided_ms=now, dry_run=int(cfg.dry_run))
        if won != "ok":
            raise _decided_error(store, case.id, won, "approve")
        decision = "approved"
    audit.append(client, event="decision", at_ms=now, retention_ms=cfg.retention_ms,
                 case_id=case.id, actor=actor,
                 data={"decision": decision, "dry_run": cfg.dry_run})
    if cfg.dry_run:
        outcomes = tuple(
            LockOutcome(lk, "dry_run", "dry run: nothing was changed; it would be released "
                                       "if still held by the approved holder")
            for lk in case.locks
        )
        _finish(client, store, case, outcomes, cfg, final=State.APPROVED)
    else:
        deleter = Releaser(client)
        delayer = Releaser(client, grace_ms=cfg.lock_delay_ms) if cfg.lock_delay_ms else deleter
        outcomes = tuple(
            # Lock-delay means nothing for a counter lock: the next contender's INCR+EXPIRE
            # re-arms the shortened TTL at once, so counters are always deleted.
            _release_one(client, deleter if lk.layout is Layout.COUNTER else delayer,
                         case, lk, actor, cfg)
            for lk in case.locks
        )
        _finish(client, store, case, outcomes, cfg, final=State.RELEASED)
    final_case = store.get(case.id) or case
    return ApprovalReport(final_case, outcomes, cfg.dry_run)


def reject(client: redis.Redis, case_id: str, actor: str, reason: str,
           cfg: ReclaimConfig) -> Case:
    actor = _check_actor(actor)
    reason = reason.strip()
    if not reason:
        raise CaseError("a rejection needs a reason (--reason TEXT): it goes in the audit log")
    if len(reason) > MAX_TEXT:
        raise CaseError(f"the reason is {len(reason)} characters; at most {MAX_TEXT} expected")
    case = get_case(client, case_id, cfg)
    store = CaseStore(client, retention_ms=cfg.retention_ms)
    now = server_ms(client)
    won = store.transition(case.id, State.PENDING, State.REJECTED, now, decided_by=actor,
                           decided_ms=now, decision_reason=reason)
    if won != "ok":
        raise _decided_error(store, case.id, won, "reject")
    audit.append(client, event="decision", at_ms=now, retention_ms=cfg.retention_ms,
                 case_id=case.id, actor=actor, data={"decision": "rejected", "reason": reason})
    store.close(case, now)
    audit.append(client, event="case_closed", at_ms=now, retention_ms=cfg.retention_ms,
                 case_id=case.id, data={"state": State.REJECTED.value})
    return store.get(case.id) or case


def _release_one(client: redis.Redis, releaser: Releaser, case: Case, lock: CaseLock,
                 actor: str, cfg: ReclaimConfig) -> LockOutcome:
    target = Target(key=lock.key, layout=lock.layout, identity=lock.identity,
                    ttl_ms=lock.ttl_ms, observed_ms=lock.observed_ms, counter=lock.counter)
    result = releaser.release(target)
    now = server_ms(client)
    audit.append(client, event="release", at_ms=now, retention_ms=cfg.retention_ms,
                 case_id=case.id, actor=actor, data=_result_json(lock, result))
    if result.outcome is not Outcome.RELEASED:
        return LockOutcome(lock, result.outcome.value, result.detail)
    verified = releaser.verify(target, result)
    audit.append(client, event="verification", at_ms=server_ms(client),
                 retention_ms=cfg.retention_ms, case_id=case.id,
                 data={**_result_json(lock, verified), "ok": verified.outcome is Outcome.RELEASED})
    if verified.outcome is not Outcome.RELEASED:
        return LockOutcome(lock, verified.outcome.value, verified.detail)
    if releaser.grace_ms is not None:
        # Still held until the grace TTL lapses: waking waiters now would only make them fail.
        return LockOutcome(lock, verified.outcome.value, verified.detail)
    wake = tuple(releaser.wake_waiters(target))
    published = False
    if cfg.publish_release_event:
        client.publish(cfg.release_channel, json.dumps(
            release_event(lock, case.id, actor, now), separators=(",", ":")))
        published = True
    return LockOutcome(lock, verified.outcome.value, verified.detail, wake, published)


def release_event(lock: CaseLock, case_id: str, actor: str, now_ms: int) -> dict[str, Any]:
    """The reclaim event (DESIGN §4): one JSON object per released lock."""
    return {
        "event": "lock_released",
        "key": escape(lock.key, 1024),
        "key_hex": lock.key.hex(),
        "layout": lock.layout.value,
        "reason": lock.reason.value,
        "case_id": case_id,
        "approved_by": actor,
        "released_at": datetime.fromtimestamp(now_ms / 1000, tz=UTC).isoformat(
            timespec="milliseconds").replace("+00:00", "Z"),
        "released_at_ms": now_ms,
    }


def _finish(client: redis.Redis, store: CaseStore, case: Case,
            outcomes: tuple[LockOutcome, ...], cfg: ReclaimConfig, final: State) -> None:
    now = server_ms(client)
    body = json.dumps([{**_outcome_json(o)} for o in outcomes], separators=(",", ":"))
    store.transition(case.id, State.APPROVED, final, now, outcomes=body, closed_ms=now)
    store.close(case, now)
    audit.append(client, event="case_closed", at_ms=now, retention_ms=cfg.retention_ms,
                 case_id=case.id, data={"state": final.value, "dry_run": cfg.dry_run,
                                        "outcomes": {o.lock.key.hex(): o.outcome
                                                     for o in outcomes}})


def _outcome_json(o: LockOutcome) -> dict[str, Any]:
    return {"key": escape(o.lock.key), "key_hex": o.lock.key.hex(), "outcome": o.outcome,
            "detail": o.detail, "wake": list(o.wake), "event_published": o.event_published}


def _result_json(lock: CaseLock, result: Result) -> dict[str, Any]:
    return {"key": escape(lock.key), "key_hex": lock.key.hex(), "layout": lock.layout.value,
            "outcome": result.outcome.value, "detail": result.detail}


def _check_actor(actor: str) -> str:
    actor = actor.strip()
    if not actor:
        raise CaseError("who decides must be named (--by NAME): it goes in the audit log")
    if len(actor) > 200:
        raise CaseError("the approver's name is over 200 characters")
    return actor


def _decided_error(store: CaseStore, case_id: str, state: str, verb: str) -> CaseError:
    if state == "missing":
        return CaseError(f"no case {case_id}")
    if state == State.EXPIRED.value:
        return CaseError(f"cannot {verb} case {case_id}: it expired before a decision; "
                         "run a new scan to open a fresh case")
    case = store.get(case_id)
    who = f" by {case.decided_by}" if case is not None and case.decided_by else ""
    when = ""
    if case is not None and case.decided_ms:
        when = " at " + datetime.fromtimestamp(case.decided_ms / 1000, tz=UTC).strftime(
            "%Y-%m-%d %H:%M:%S UTC")
    hint = ""
    if (case is not None and state == State.APPROVED.value and not case.outcomes
            and not case.dry_run):
        hint = (f"; its release has not finished: if the approver died, "
                f"`lockguard approve {case_id} --by NAME --resume` completes it")
    return CaseError(f"cannot {verb} case {case_id}: already decided ({state}{who}{when}){hint}")
