"""Reclaiming: the engine's steps after a scan. Open a case, decide it, release, verify, announce.

Like `bot.scan.loop`, this knows nothing of Slack, the CLI or the scheduler; they all call these
functions and render what comes back.

Safety, in the order the steps run:
1. A case records the exact bytes shown to the human; only those are ever compared and deleted.
2. The decision is one atomic transition (`bot.cases.case_store`): a double click or two
   replicas give one winner, and everyone else gets "already decided".
3. Dry run stops after the decision: no lock is touched and nothing is published.
4. Each lock, in batches: judged again as a scan would judge it (`bot.cases.recheck`), then one
   script compares the exact approved bytes, deletes (or lock-delays), wakes the library's waiters,
   publishes the reclaim event and records the outcome, all atomically; then verification.
   A crash anywhere leaves every lock either decided and recorded, or untouched: `resume`
   finishes the rest and never re-labels what an earlier run did.
5. Every step is appended to the audit stream.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import Any

import redis

from bot.cases import audit
from bot.cases.case import Case, State
from bot.cases.case_store import CaseStore, save_manifest
from bot.cases.config import ReclaimConfig
from bot.cases.deadlocks import DeadlockStep
from bot.cases.decision import check_actor, decided_error, get_case
from bot.cases.proposal import Proposal
from bot.cases.release_lease import ReleaseBusyError, ReleaseLease
from bot.cases.releasing import LockOutcome, release_batch
from bot.core import logs
from bot.core.clock import iso_utc
from bot.core.display import key_ref
from bot.core.errors import CaseError, SameApproverError
from bot.core.model import Finding
from bot.evidence import rank, record_ranked
from bot.release import Outcome
from bot.scan.loop import run_scan
from bot.scan.result import ScanOptions, ScanResult
from bot.store.scans import server_ms

#: Per-lock outcomes an ApprovalReport keeps for people (all are counted and recorded).
REPORT_KEEP = 200
_log = logs.logger("cases")


@dataclass(frozen=True, slots=True)
class ApprovalReport:
    case: Case
    outcomes: tuple[LockOutcome, ...]  # the first REPORT_KEEP of this run
    dry_run: bool
    counts: dict[str, int] = field(default_factory=dict)  # outcome -> locks, this run
    #: True when this approval was recorded but another person's is still needed: nothing ran.
    waiting: bool = False

    @property
    def released(self) -> int:
        return self.counts.get(Outcome.RELEASED.value, 0)

    @property
    def errors(self) -> int:
        return self.counts.get(Outcome.ERROR.value, 0)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


Progress = Callable[[int, int], None]  # (locks done, locks in the case)


def record_scan(
    client: redis.Redis, summary: dict[str, Any], cfg: ReclaimConfig, now_ms: int
) -> None:
    audit.append(client, event="scan", at_ms=now_ms, retention_ms=cfg.retention_ms, data=summary)


def scan_and_propose(
    client: redis.Redis,
    options: ScanOptions,
    cfg: ReclaimConfig,
    *,
    propose: bool = True,
    on_finding: Callable[[Finding], None] | None = None,
    keep: int = 50,
) -> tuple[ScanResult, Case | None]:
    """The scan tick every entry point runs: scan, audit the summary, and (when `propose`)
    put every releasable finding not already in a live case, nor rejected, into one new case
    (`Proposal`)."""
    proposal: Proposal | None = None
    if propose:
        proposal = Proposal(
            client,
            server_ms(client),
            case_ttl_ms=cfg.case_ttl_ms,
            retention_ms=cfg.retention_ms,
        )
    deadlocks = DeadlockStep(client, options.policy, keep, proposal, on_finding)
    try:
        result = run_scan(
            client,
            options,
            on_finding=deadlocks.seen,
            keep=keep,
            before_commit=deadlocks.before_commit,
            on_redisson=deadlocks.locks,
        )
        result.worst = rank(client, result.worst, deadlocks.locks.owner)  # impacts, worst first
        record_ranked(client, result.worst, result.server_time_ms)  # digests, the Home tab
    except BaseException:
        if proposal is not None:
            with suppress(redis.RedisError):  # else the opening case lapses by itself
                proposal.abandon()
        raise
    case = proposal.finish() if proposal is not None else None
    if proposal is not None:
        result.proposal = proposal.summary()
        if proposal.digests:  # the findings name the oversized keys as the case does
            got = proposal.digests
            result.worst = [replace(f, big=got.get(f.key, f.big)) for f in result.worst]
    record_scan(client, result.summary(), cfg, result.server_time_ms)
    if case is not None:
        _announce_case(client, case, cfg, proposal.summary())  # type: ignore[union-attr]
    return result, case


def open_case(
    client: redis.Redis, findings: list[Finding], cfg: ReclaimConfig, now_ms: int | None = None
) -> Case | None:
    """A pending case for the releasable findings that are not already in a live case nor
    rejected; None when there is nothing new to decide."""
    now = server_ms(client) if now_ms is None else now_ms
    proposal = Proposal(client, now, case_ttl_ms=cfg.case_ttl_ms, retention_ms=cfg.retention_ms)
    for f in sorted(findings, key=Finding.sort_key):
        proposal.add(f)
    case = proposal.finish()
    if case is not None:
        _announce_case(client, case, cfg, proposal.summary())
    return case


def _announce_case(
    client: redis.Redis, case: Case, cfg: ReclaimConfig, summary: dict[str, Any]
) -> None:
    save_manifest(client, case, summary, cfg.retention_ms)
    logs.event(
        _log,
        "case_opened",
        case_id=case.id,
        expires_ms=case.expires_ms,
        **{"locks": case.lock_count, **summary},
    )
    audit.append(
        client,
        event="case_opened",
        at_ms=case.created_ms,
        retention_ms=cfg.retention_ms,
        case_id=case.id,
        data={
            "lock_count": case.lock_count,
            **summary,
            "first_locks": [
                {**key_ref(lk.key, lk.big), "reason": lk.reason.value} for lk in case.locks[:20]
            ],
            "expires_ms": case.expires_ms,
        },
    )


def approve(
    client: redis.Redis,
    case_id: str,
    actor: str,
    cfg: ReclaimConfig,
    *,
    resume: bool = False,
    progress: Progress | None = None,
) -> ApprovalReport:
    """Approve a pending case and release its locks. With `resume`, finish the release of a
    case whose approver died half-way, or retry the locks that errored: locks with a recorded
    outcome keep it (never released twice, never re-labelled)."""
    actor = check_actor(actor)
    case = get_case(client, case_id, cfg)
    # A resume runs only while it holds the lease; a first approval that finds it taken (a
    # double click) goes on to the transition, which tells it the case is already decided.
    with ReleaseLease(client, case.id, required=resume) as lease:
        return _approve_leased(client, case, actor, cfg, resume, progress, lease)


def _approve_leased(
    client: redis.Redis,
    case: Case,
    actor: str,
    cfg: ReclaimConfig,
    resume: bool,
    progress: Progress | None,
    lease: ReleaseLease,
) -> ApprovalReport:
    store = CaseStore(client, retention_ms=cfg.retention_ms)
    now = server_ms(client)
    if resume:
        decision = _resume(store, case, cfg, now)
    else:
        won = _approve(client, store, case, actor, cfg, now)
        if isinstance(won, ApprovalReport):
            return won  # recorded; another person's approval is still needed
        decision = won
    audit.append(
        client,
        event="decision",
        at_ms=now,
        retention_ms=cfg.retention_ms,
        case_id=case.id,
        actor=actor,
        data={"decision": decision, "dry_run": cfg.dry_run},
    )
    logs.event(
        _log,
        "decision",
        case_id=case.id,
        decision=decision,
        actor=actor,
        dry_run=cfg.dry_run,
        locks=case.lock_count,
    )
    lease.ensure()
    counts, kept = _release_all(client, store, case, actor, cfg, progress, lease)
    final = (
        State.APPROVED
        if cfg.dry_run
        else (
            State.INCOMPLETE
            if counts.get(Outcome.ERROR.value) or _errors_recorded(store, case.id)
            else State.RELEASED
        )
    )
    _finish(client, store, case, final, counts, cfg)
    final_case = store.get(case.id) or case
    return ApprovalReport(final_case, tuple(kept), cfg.dry_run, dict(counts))


def _resume(store: CaseStore, case: Case, cfg: ReclaimConfig, now: int) -> str:
    """A cut-short release taken up again: "resumed", or CaseError saying why not."""
    if case.state not in (State.APPROVED, State.INCOMPLETE) or case.dry_run:
        raise CaseError(
            f"case {case.id} has no unfinished release to resume "
            f"(state {case.effective_state(now).value}"
            f"{', approved in dry run' if case.dry_run else ''})"
        )
    if cfg.dry_run:
        raise CaseError(
            "dry run is on (LOCKGUARD_DRY_RUN=true): a resumed release would "
            "touch locks; turn dry run off to resume"
        )
    if store.transition(case.id, (State.APPROVED, State.INCOMPLETE), State.APPROVED, now) != "ok":
        raise CaseError(f"case {case.id} changed while resuming; see `lockguard cases`")
    return "resumed"


def _approve(
    client: redis.Redis,
    store: CaseStore,
    case: Case,
    actor: str,
    cfg: ReclaimConfig,
    now: int,
) -> str | ApprovalReport:
    """The approval, one atomic transition: "approved", or (a case that needs two people) the
    report of an approval recorded while the other is awaited, or an error saying why not."""
    if case.state is State.OPENING:
        raise CaseError(
            f"case {case.id} is still being opened by a scan; decide it when that scan completes"
        )
    won, approvals = store.approve(
        case.id, actor, now, required=cfg.required_approvals, dry_run=cfg.dry_run
    )
    if won == "same":
        raise SameApproverError(
            f"case {case.id} needs approvals from {cfg.required_approvals} different "
            f"people; {actor} has already approved it"
        )
    if won == "waiting":
        recorded = {"approvals": approvals, "required": cfg.required_approvals}
        audit.append(
            client,
            event="decision",
            at_ms=now,
            retention_ms=cfg.retention_ms,
            case_id=case.id,
            actor=actor,
            data={"decision": "approval_recorded", **recorded},
        )
        logs.event(
            _log,
            "decision",
            case_id=case.id,
            decision="approval_recorded",
            actor=actor,
            **recorded,
        )
        return ApprovalReport(store.get(case.id) or case, (), cfg.dry_run, {}, waiting=True)
    if won != "ok":
        raise decided_error(store, case.id, won, "approve")
    return "approved"


def _release_all(
    client: redis.Redis,
    store: CaseStore,
    case: Case,
    actor: str,
    cfg: ReclaimConfig,
    progress: Progress | None,
    lease: ReleaseLease,
) -> tuple[Counter[str], list[LockOutcome]]:
    """Every lock of the case, batch by batch (in dry run, none touched): the outcome counts and
    the first REPORT_KEEP outcomes. Stops between batches once another process has taken the
    release lease over (this one was paused past it): that process finishes the case."""
    counts: Counter[str] = Counter()
    kept: list[LockOutcome] = []
    done = 0
    for batch in store.locks(case.id):
        if lease.lost:
            raise ReleaseBusyError(
                f"case {case.id}: this process lost its release lease (paused or cut off from "
                f"Redis for over {lease.lease_ms // 1000} s) and another one resumed the release; "
                "see `lockguard cases`"
            )
        if cfg.dry_run:
            results = [
                LockOutcome(
                    lk,
                    "dry_run",
                    "dry run: nothing was changed; it would be "
                    "released if still held by the approved holder",
                )
                for _, lk in batch
            ]
        else:
            results = release_batch(client, store, case, batch, actor, cfg)
        for o in results:
            counts[o.outcome] += 1
            if len(kept) < REPORT_KEEP:
                kept.append(o)
        done += len(batch)
        if progress is not None:
            progress(done, case.lock_count)
    return counts, kept


def _errors_recorded(store: CaseStore, case_id: str) -> bool:
    case = store.get(case_id)
    return case is None or case.outcome_counts.get(Outcome.ERROR.value, 0) > 0


def release_event_time(ms: int) -> str:
    return iso_utc(ms)


def _finish(
    client: redis.Redis,
    store: CaseStore,
    case: Case,
    final: State,
    counts: Counter[str],
    cfg: ReclaimConfig,
) -> None:
    now = server_ms(client)
    store.transition(case.id, State.APPROVED, final, now, closed_ms=now)
    if final is not State.INCOMPLETE:
        store.close(case, now)
    audit.append(
        client,
        event="case_closed",
        at_ms=now,
        retention_ms=cfg.retention_ms,
        case_id=case.id,
        data={"state": final.value, "dry_run": cfg.dry_run, "outcomes": dict(counts)},
    )
    logs.event(
        _log,
        "case_closed",
        logging.WARNING if final is State.INCOMPLETE else logging.INFO,
        case_id=case.id,
        state=final.value,
        dry_run=cfg.dry_run,
        outcomes=dict(counts),
    )
