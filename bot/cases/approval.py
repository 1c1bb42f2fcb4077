"""Carrying out an approval: decide, then release the case's locks batch by batch, verify,
announce. Safety, in the order the steps run:
1. Only the exact bytes shown to the human are ever compared and deleted.
2. The decision is one atomic transition: one winner, everyone else gets "already decided".
3. Dry run stops after the decision: no lock is touched and nothing is published.
4. One process releases a case at a time (`release_lease`). Each lock is judged again as a scan
   would (`recheck`), then one script compares, deletes (or lock-delays), wakes, announces and
   records atomically (`bot.release`); then verification. A crash leaves every lock decided and
   recorded, or untouched: `resume` finishes the rest and never re-labels an earlier run's.
5. Every step is appended to the audit stream.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from bot.cases import audit, receipts
from bot.cases.case import Case, CaseLock, State
from bot.cases.case_store import CaseStore
from bot.cases.decision import check_actor, decided_error, get_case, record_decision
from bot.cases.recheck import recheck
from bot.cases.reclaim_config import ReclaimConfig
from bot.cases.release_lease import ReleaseBusyError, ReleaseLease
from bot.core import logs
from bot.core.display import key_ref, key_text
from bot.core.errors import CaseError, SameApproverError
from bot.core.model import Layout, Reason
from bot.core.pacing import Pacer
from bot.release import ApprovedLock, Outcome, Recording, Releaser, Result, describe_error
from bot.scan import oversized
from bot.store.keyspace import case_key, outcomes_key
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


def approve(
    client: redis.Redis,
    case_id: str,
    actor: str,
    cfg: ReclaimConfig,
    *,
    resume: bool = False,
    progress: Progress | None = None,
) -> ApprovalReport:
    """Approve a pending case and release its locks. With `resume`, finish a cut-short release or
    retry the locks that errored; a recorded outcome stands (never released twice)."""
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
    record_decision(
        client,
        case.id,
        actor,
        cfg,
        now,
        {"decision": decision, "dry_run": cfg.dry_run},
        locks=case.lock_count,
    )
    lease.ensure()
    counts, kept = _release_all(client, store, case, actor, cfg, progress, lease)
    if cfg.dry_run:
        final = State.APPROVED
    elif counts.get(Outcome.ERROR.value) or _errors_recorded(store, case.id):
        final = State.INCOMPLETE
    else:
        final = State.RELEASED
    _finish(client, store, case, final, counts, cfg)
    final_case = store.get(case.id) or case
    return ApprovalReport(final_case, tuple(kept), cfg.dry_run, dict(counts))


def _resume(store: CaseStore, case: Case, cfg: ReclaimConfig, now: int) -> str:
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
    """ "approved", or the report of an approval recorded while another is awaited."""
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
        record_decision(
            client, case.id, actor, cfg, now, {"decision": "approval_recorded", **recorded}
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
    """The outcome counts and the first REPORT_KEEP outcomes. Stops between batches once another
    process has taken the release lease over: that one finishes the case."""
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


_release_log = logs.logger("release")


#: Marks an outcome read from a receipt (`bot.cases.receipts`), not from the case.
_FROM_RECEIPT = "_from_receipt"


@dataclass(frozen=True, slots=True)
class LockOutcome:
    lock: CaseLock
    outcome: str  # an Outcome value, or "dry_run"
    detail: str
    wake: tuple[str, ...] = ()
    event_published: bool = False


@dataclass(frozen=True, slots=True)
class _Releasers:
    """`delete`, and `delay` (lock-delay; `delete` itself when off). Counters are always deleted:
    the next contender's INCR+EXPIRE would re-arm a shortened TTL at once."""

    delete: Releaser
    delay: Releaser

    @classmethod
    def of(cls, client: redis.Redis, lock_delay_ms: int, pacer: Pacer) -> _Releasers:
        delete = Releaser(client, pacer=pacer)
        delay = Releaser(client, grace_ms=lock_delay_ms, pacer=pacer) if lock_delay_ms else delete
        return cls(delete, delay)

    def for_lock(self, lock: CaseLock) -> Releaser:
        return self.delete if lock.layout is Layout.COUNTER else self.delay


@dataclass(frozen=True, slots=True)
class _Planned:
    index: int
    lock: CaseLock
    target: ApprovedLock
    recording: Recording


def release_batch(
    client: redis.Redis,
    store: CaseStore,
    case: Case,
    batch: list[tuple[int, CaseLock]],
    actor: str,
    cfg: ReclaimConfig,
) -> list[LockOutcome]:
    """Every lock of the batch ends with a recorded outcome. An oversized key goes alone: its
    exact bytes are held for it only, one at a time."""
    big = [lock for lock in batch if lock[1].big is not None]
    if big and len(batch) > 1:
        alone = [[lock] for lock in big]
        parts = [[lock for lock in batch if lock[1].big is None], *alone]
        done = {
            i: o
            for part in parts
            if part
            for (i, _), o in zip(
                part, release_batch(client, store, case, part, actor, cfg), strict=True
            )
        }
        return [done[i] for i, _ in batch]
    out, todo = _keep_earlier(client, store, case.id, batch)
    rows: list[tuple[int, LockOutcome, bool]] = []  # (index, outcome, verified)
    try:
        exact, lost = _found_again(client, todo)
        rows += lost
        todo = [(i, lk) for i, lk in todo if i in exact]
        keys = [exact[i] for i, _ in todo]
        verdicts = recheck(client, [lk for _, lk in todo], cfg.policy, cfg.patterns, keys)
    except redis.RedisError as exc:
        detail = f"not released: could not read it again before release ({describe_error(exc)})"
        rows += [(i, LockOutcome(lk, Outcome.ERROR.value, detail), False) for i, lk in todo]
        verdicts, exact = [], {}
    releasers = _Releasers.of(client, cfg.lock_delay_ms, Pacer(cfg.budget))
    approver = case.decided_by or actor
    # One pipeline per releaser, in the order the batch first needs each.
    groups: dict[Releaser, list[_Planned]] = {}
    for (i, lk), v in zip(todo, verdicts, strict=True):
        if v.outcome is not None:
            rows.append((i, LockOutcome(lk, v.outcome.value, v.detail), False))
            continue
        releaser = releasers.for_lock(lk)
        planned = _plan(
            client, case.id, (i, lk, exact[i]), v.reason, approver, releaser.grace_ms, cfg
        )
        groups.setdefault(releaser, []).append(planned)
    for releaser, items in groups.items():
        rows += _release_group(client, store, case.id, releaser, items, cfg)
    _record(client, store, case, rows, actor, cfg)
    for i, o, _ in rows:
        out[i] = o
    return [out[i] for i, _ in batch]


def _keep_earlier(
    client: redis.Redis, store: CaseStore, case_id: str, batch: list[tuple[int, CaseLock]]
) -> tuple[dict[int, LockOutcome], list[tuple[int, CaseLock]]]:
    """The outcomes an earlier run decided (those only in receipts copied into the case), and the
    locks left to do."""
    out: dict[int, LockOutcome] = {}
    todo: list[tuple[int, CaseLock]] = []
    copied: list[tuple[int, LockOutcome]] = []  # receipts not yet in the case
    for (i, lk), rec in zip(batch, _recorded(client, store, case_id, batch), strict=True):
        if rec is not None and rec["outcome"] != Outcome.ERROR.value:
            out[i] = _earlier(lk, rec)
            if rec.get(_FROM_RECEIPT):
                copied.append((i, out[i]))
        else:
            todo.append((i, lk))
    if copied:
        store.record(case_id, [(i, o.outcome, _outcome_json(o)) for i, o in copied])
    return out, todo


def _found_again(
    client: redis.Redis, todo: list[tuple[int, CaseLock]]
) -> tuple[dict[int, bytes], list[tuple[int, LockOutcome, bool]]]:
    """Each lock's exact key by index (an oversized key found again by the sha256 shown), and
    the outcomes of those not found."""
    exact: dict[int, bytes] = {}
    lost: list[tuple[int, LockOutcome, bool]] = []
    for i, lk in todo:
        if lk.big is None:
            exact[i] = lk.key
            continue
        got = oversized.find(client, lk.big)
        if got.key is not None:
            exact[i] = got.key
        else:
            outcome = (
                Outcome.SKIPPED_UNPROVEN if got.why == oversized.TWINS else Outcome.ALREADY_GONE
            )
            lost.append((i, LockOutcome(lk, outcome.value, f"not released: {got.why}"), False))
    return exact, lost


def _plan(
    client: redis.Redis,
    case_id: str,
    lock: tuple[int, CaseLock, bytes],
    reason: Reason | None,
    approver: str,
    grace_ms: int | None,
    cfg: ReclaimConfig,
) -> _Planned:
    index, lk, key = lock
    target = ApprovedLock(
        key=key,
        layout=lk.layout,
        identity=lk.identity,
        ttl_ms=lk.ttl_ms,
        observed_ms=lk.observed_ms,
        counter=lk.counter,
        reason=reason,
    )
    recording = Recording(
        outcomes_key(case_id),
        case_key(case_id),
        index,
        cfg.release_channel if cfg.publish_release_event else "",
        _event_prefix(lk, case_id, approver, grace_ms),
        receipts.receipt_keys(client, case_id, [key])[0],
    )
    return _Planned(index, lk, target, recording)


def _release_group(
    client: redis.Redis,
    store: CaseStore,
    case_id: str,
    releaser: Releaser,
    items: list[_Planned],
    cfg: ReclaimConfig,
) -> list[tuple[int, LockOutcome, bool]]:
    """Released, re-read where a reply was lost, verified."""
    results = releaser.release_many([(p.target, p.recording) for p in items])
    receipts.keep(client, case_id, [p.target.key for p in items], cfg.retention_ms)
    results = _resolve_lost(client, store, case_id, items, results)
    verified = releaser.verifier.verify_many(
        [(p.target, res) for p, res in zip(items, results, strict=True)]
    )
    return [
        (
            p.index,
            LockOutcome(p.lock, res.outcome.value, res.detail, res.wake, res.event_published),
            True,
        )
        for p, res in zip(items, verified, strict=True)
    ]


def _recorded(
    client: redis.Redis, store: CaseStore, case_id: str, locks: list[tuple[int, CaseLock]]
) -> list[dict[str, Any] | None]:
    """What an earlier run recorded for each lock: in the case, or in its receipt (a cluster run
    cut short before copying it)."""
    recorded = store.outcomes_of(case_id, [i for i, _ in locks])
    missing = [
        n for n, rec in enumerate(recorded) if rec is None or rec["outcome"] == Outcome.ERROR.value
    ]
    found = receipts.read(client, case_id, [(locks[n][0], locks[n][1].key) for n in missing])
    for n, rec in zip(missing, found, strict=True):
        if rec is not None:
            recorded[n] = {**rec, _FROM_RECEIPT: True}
    return recorded


def _resolve_lost(
    client: redis.Redis,
    store: CaseStore,
    case_id: str,
    items: list[_Planned],
    results: list[Result],
) -> list[Result]:
    """A lock whose reply was lost (timeout, dropped connection) may have been released: its
    script recorded the outcome if it ran. Re-read, never guess."""
    lost = [n for n, r in enumerate(results) if r.outcome is Outcome.ERROR]
    if not lost:
        return results
    try:
        recorded = _recorded(
            client, store, case_id, [(items[n].index, items[n].lock) for n in lost]
        )
    except redis.RedisError:
        return results  # still unknown: recorded as errors, and `resume` re-reads them
    out = list(results)
    for n, rec in zip(lost, recorded, strict=True):
        if rec is not None and rec["outcome"] != Outcome.ERROR.value:
            out[n] = Result(
                results[n].key,
                Outcome(rec["outcome"]),
                "decided by the release whose reply was lost: "
                f"{rec['outcome']} (re-read from the case)",
                event_published=bool(rec.get("event_published")),
            )
    return out


def _record(
    client: redis.Redis,
    store: CaseStore,
    case: Case,
    rows: list[tuple[int, LockOutcome, bool]],
    actor: str,
    cfg: ReclaimConfig,
) -> None:
    """Outcome records, and one audit entry per lock saying whether it was verified (not two:
    they would push the decision out of `lockguard audit`'s default 50)."""
    if not rows:
        return
    _log_outcomes(case.id, [o for _, o, _ in rows])
    try:
        store.record(case.id, [(i, o.outcome, _outcome_json(o)) for i, o, _ in rows])
        now = server_ms(client)
        with client.pipeline(transaction=False) as pipe:
            for _, o, verified in rows:
                audit.append(
                    pipe,
                    event="release",
                    at_ms=now,
                    retention_ms=cfg.retention_ms,
                    case_id=case.id,
                    actor=actor,
                    data={**_outcome_json(o), "verified": verified},
                )
            pipe.execute()
    except redis.RedisError:
        # Released locks are recorded by their scripts; `resume` does the others. On a cluster
        # the scripts recorded into receipts only: the case must not finish without them.
        if receipts.in_use(client):
            raise


#: Past this many errors of one batch with the same detail, one log line names the first few.
_ERRORS_PER_LINE = 3


def _log_outcomes(case_id: str, outcomes: list[LockOutcome]) -> None:
    errors: dict[str, list[LockOutcome]] = {}
    for o in outcomes:
        if o.outcome == Outcome.ERROR:
            errors.setdefault(o.detail, []).append(o)
    for detail, same in errors.items():
        if len(same) > _ERRORS_PER_LINE:
            logs.event(
                _release_log,
                "release",
                logging.WARNING,
                case_id=case_id,
                outcome=Outcome.ERROR,
                detail=detail,
                locks=len(same),
                first_keys=" ".join(
                    key_text(o.lock.key, o.lock.big) for o in same[:_ERRORS_PER_LINE]
                ),
            )
    for o in outcomes:
        if o.outcome == Outcome.ERROR and len(errors[o.detail]) > _ERRORS_PER_LINE:
            continue
        logs.event(
            _release_log,
            "release",
            logging.WARNING if o.outcome == Outcome.ERROR else logging.INFO,
            case_id=case_id,
            key=key_text(o.lock.key, o.lock.big),
            layout=o.lock.layout.value,
            outcome=o.outcome,
            detail=o.detail,
            event_published=o.event_published,
        )


def _earlier(lock: CaseLock, rec: dict[str, Any]) -> LockOutcome:
    return LockOutcome(
        lock,
        str(rec["outcome"]),
        str(rec.get("detail") or "decided by an earlier run"),
        tuple(rec.get("wake") or ()),
        bool(rec.get("event_published")),
    )


def _event_prefix(lock: CaseLock, case_id: str, actor: str, grace_ms: int | None) -> str:
    """The reclaim event up to the fields the script adds: `event`, `released_at(_ms)`."""
    body: dict[str, Any] = {
        **key_ref(lock.key, lock.big),
        "layout": lock.layout.value,
        "reason": lock.reason.value,
        "case_id": case_id,
        "approved_by": actor,
    }
    if grace_ms is not None:
        body["grace_ms"] = grace_ms
    return json.dumps(body, separators=(",", ":"))[:-1] + ","


def _outcome_json(o: LockOutcome) -> dict[str, Any]:
    return {
        **key_ref(o.lock.key, o.lock.big),
        "outcome": o.outcome,
        "detail": o.detail,
        "wake": list(o.wake),
        "event_published": o.event_published,
    }
