"""Scheduled scans, digests and the resume of cut-short releases, inside `lockguard serve`.

Every replica runs a `Scheduler` (APScheduler 3.x, a BackgroundScheduler in UTC); each tick
runs only on the replica that holds the leader lease (`bot.ops.leader`) and is skipped by the
others, so several replicas on one Redis run each scan and digest once. Jobs coalesce (a backlog
runs once) and never overlap themselves.

- scan (`LOCKGUARD_SCAN_SCHEDULE`): `engine.scan("schedule")`, then `on_scan_result(result,
  case)`. The engine records every completed scan itself (`{lockguard}:scan:last`, the audit
  stream). A scan refused because another one holds the scan lease is skipped (that scan
  records itself); any other failure goes to `on_error("schedule", exc)`.
- digest (`LOCKGUARD_DIGEST_SCHEDULE`): `on_digest()`; a failure goes to `on_error("digest", exc)`.
- resume: when this replica becomes leader (a pass at once and one just after the stall
  window) and then every `resume_every_s`, `Resumer` finishes every case whose release was cut
  short (its process killed mid-release) exactly as `lockguard approve --resume` does, as its
  original approver, and hands each report to `on_resumed(report)` (the Slack layer updates the
  case's message); failures go to `on_error("resume", exc)`. Dry run on: nothing is resumed.

A release still running on some replica (a Slack click a moment ago) looks like a cut-short one
from outside: both are `approved` with some outcomes recorded. The resumer tells them apart by
progress: a case is resumed only once its recorded outcomes have not moved for `resume_stall_s`
(a live release records each lock as it goes). Even a wrong guess releases nothing twice and
publishes no event twice: the release script skips every lock that already has an outcome.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.cases.case import Case, State
from bot.cases.reclaim import ApprovalReport
from bot.core import logs
from bot.core.errors import ScanBusyError
from bot.engine import Engine
from bot.ops.leader import Leader
from bot.ops.schedules import Schedule, make_trigger
from bot.scan.result import ScanResult

#: How often the leader looks for cut-short releases, and how long one must make no progress.
RESUME_EVERY_S = 20.0
RESUME_STALL_S = 60.0
#: The most recent cases looked at (one scan opens at most one case).
RESUME_WINDOW = 50
#: Resumes of one case this process tries before leaving it to a person (`approve --resume`).
RESUME_ATTEMPTS = 3
#: Who resumes a case whose record names no approver (should not happen).
FALLBACK_ACTOR = "lockguard-scheduler"

ScanCallback = Callable[[ScanResult, Case | None], None]
ErrorCallback = Callable[[str, BaseException], None]
ResumedCallback = Callable[[ApprovalReport], None]
_log = logs.logger("scheduler")


def unfinished(case: Case) -> bool:
    """A release that did not run to its end: approved (not in dry run), or incomplete with
    locks that have no outcome recorded at all (an incomplete case whose every lock has one
    ended with errors, and waits for a person's `--resume`)."""
    if case.state is State.APPROVED:
        return not case.dry_run
    if case.state is State.INCOMPLETE:
        return sum(case.outcome_counts.values()) < case.lock_count
    return False


class Resumer:
    """Finds the cut-short releases among the recent cases and finishes them."""

    def __init__(
        self,
        engine: Engine,
        *,
        stall_s: float = RESUME_STALL_S,
        window: int = RESUME_WINDOW,
        attempts: int = RESUME_ATTEMPTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.stall_s = stall_s
        self.window = window
        self.attempts = attempts
        self._clock = clock
        #: case id -> (progress seen, when it was first seen so)
        self._seen: dict[str, tuple[tuple[Any, ...], float]] = {}
        self._tries: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._said_dry_run = False

    def due(self) -> list[Case]:
        """The cut-short cases whose progress has not moved for `stall_s`."""
        if self.engine.config.dry_run:
            if not self._said_dry_run:
                self._said_dry_run = True
                logs.event(
                    _log, "resume_off", reason="dry run is on: a resumed release would touch locks"
                )
            return []
        now = self._clock()
        out: list[Case] = []
        live: set[str] = set()
        for case in self.engine.cases(self.window):
            if not unfinished(case) or self._tries[case.id] >= self.attempts:
                continue
            live.add(case.id)
            progress = (
                case.state.value,
                case.decided_ms,
                tuple(sorted(case.outcome_counts.items())),
            )
            seen = self._seen.get(case.id)
            if seen is None or seen[0] != progress:
                self._seen[case.id] = (progress, now)
            elif now - seen[1] >= self.stall_s:
                out.append(case)
        for gone in set(self._seen) - live:
            del self._seen[gone]
        return out

    def run(
        self,
        still_leader: Callable[[], bool],
        on_resumed: ResumedCallback | None,
        on_error: ErrorCallback,
    ) -> list[ApprovalReport]:
        """One pass: finish each due case while this replica still leads."""
        if not self._lock.acquire(blocking=False):
            return []  # a pass is running already
        try:
            reports: list[ApprovalReport] = []
            for case in self.due():
                if not still_leader():
                    break
                report = self._finish(case, on_error)
                if report is not None:
                    reports.append(report)
                    _call("on_resumed", on_resumed, report)
            return reports
        finally:
            self._lock.release()

    def _finish(self, case: Case, on_error: ErrorCallback) -> ApprovalReport | None:
        self._tries[case.id] += 1
        self._seen.pop(case.id, None)
        actor = case.decided_by or FALLBACK_ACTOR
        logs.event(
            _log,
            "resume_started",
            logging.WARNING,
            case_id=case.id,
            actor=actor,
            state=case.state.value,
            recorded=sum(case.outcome_counts.values()),
            locks=case.lock_count,
            attempt=self._tries[case.id],
        )
        try:
            report = self.engine.approve(case.id, actor, resume=True)
        except Exception as exc:
            if self._tries[case.id] >= self.attempts:
                logs.event(
                    _log,
                    "resume_gave_up",
                    logging.ERROR,
                    case_id=case.id,
                    attempts=self._tries[case.id],
                    hint=f"lockguard approve {case.id} --by NAME --resume",
                )
            _call("on_error", on_error, "resume", exc)
            return None
        logs.event(
            _log,
            "resume_finished",
            case_id=case.id,
            state=report.case.state.value,
            outcomes=report.counts,
        )
        return report


class Scheduler:
    """`start()` starts the jobs and the leader's heartbeat; `stop()` lets running jobs finish,
    then gives the lease back (unless `release=False`)."""

    def __init__(
        self,
        engine: Engine,
        leader: Leader,
        scan_schedule: Schedule,
        digest_schedule: Schedule,
        on_scan_result: ScanCallback,
        on_digest: Callable[[], None],
        on_error: ErrorCallback,
        *,
        on_resumed: ResumedCallback | None = None,
        resume_every_s: float = RESUME_EVERY_S,
        resume_stall_s: float = RESUME_STALL_S,
        scan_keep: int = 50,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from apscheduler.executors.pool import ThreadPoolExecutor  # type: ignore[import-untyped]

        self.engine = engine
        self.leader = leader
        self.scan_schedule = scan_schedule
        self.digest_schedule = digest_schedule
        self.on_scan_result = on_scan_result
        self.on_digest = on_digest
        self.on_error = on_error
        self.on_resumed = on_resumed
        self.resume_every_s = resume_every_s
        #: Findings a scheduled scan keeps for `on_scan_result` (the worst first).
        self.scan_keep = scan_keep
        self.resumer = Resumer(engine, stall_s=resume_stall_s, clock=clock)
        # APScheduler's own info lines ("Adding job tentatively") say nothing an operator acts on
        logs.logger("apscheduler").setLevel(logging.WARNING)
        self._aps = _background_scheduler(
            timezone=UTC,
            executors={"default": ThreadPoolExecutor(4)},
            job_defaults={"coalesce": True, "max_instances": 1},
            logger=logs.logger("apscheduler"),
        )
        self._started = False
        self._listening = False

    @property
    def is_leader(self) -> bool:
        return self.leader.is_leader()

    def start(self) -> None:
        from apscheduler.triggers.interval import IntervalTrigger  # type: ignore[import-untyped]

        if self._started:
            return
        for job_id, schedule, func in (
            ("scan", self.scan_schedule, self.run_scan),
            ("digest", self.digest_schedule, self.run_digest),
        ):
            if not schedule.off:
                grace = max(1, int(schedule.interval_seconds() or 1))
                self._aps.add_job(
                    func, make_trigger(schedule), id=job_id, name=job_id, misfire_grace_time=grace
                )
        self._aps.add_job(
            self.resume_unfinished,
            IntervalTrigger(seconds=self.resume_every_s, timezone=UTC),
            id="resume",
            name="resume",
            misfire_grace_time=max(1, int(self.resume_every_s)),
        )
        if not self._listening:
            self._listening = True
            self.leader.on_change(self._leadership)
        self._aps.start()
        self._started = True
        self.leader.start()
        logs.event(
            _log,
            "scheduler_started",
            replica=self.leader.replica,
            scan=self.scan_schedule.describe(),
            digest=self.digest_schedule.describe(),
        )

    def stop(self, *, release: bool = True) -> None:
        """Safe to call twice."""
        if self._started:
            self._started = False
            self._aps.shutdown(wait=True)
        self.leader.stop(release=release)

    def next_run_times(self) -> dict[str, int | None]:
        """`scan` and `digest` -> when each runs next (epoch ms, UTC; None when off), whichever
        replica leads then."""
        out: dict[str, int | None] = {}
        now = datetime.now(UTC)
        for job_id, schedule in (("scan", self.scan_schedule), ("digest", self.digest_schedule)):
            job = self._aps.get_job(job_id) if self._started else None
            when: datetime | None = None
            if job is not None:
                when = job.next_run_time
            elif not schedule.off:
                when = make_trigger(schedule).get_next_fire_time(None, now)
            out[job_id] = int(when.timestamp() * 1000) if when is not None else None
        return out

    # -- the jobs (public: serve and tests may run one now) -----------------------------------

    def run_scan(self) -> bool:
        """One scheduled scan, if this replica leads. True when it ran and completed."""
        if not self.leader.is_leader():
            return False
        try:
            result, case = self.engine.scan("schedule", keep=self.scan_keep)
        except ScanBusyError as exc:
            logs.event(_log, "scheduled_scan_skipped", reason=str(exc)[:200])
            return False
        except Exception as exc:
            _call("on_error", self.on_error, "schedule", exc)
            return False
        _call("on_scan_result", self.on_scan_result, result, case)
        return True

    def run_digest(self) -> bool:
        """The digest, if this replica leads. True when `on_digest` returned."""
        if not self.leader.is_leader():
            return False
        try:
            self.on_digest()
        except Exception as exc:
            _call("on_error", self.on_error, "digest", exc)
            return False
        return True

    def resume_unfinished(self) -> list[ApprovalReport]:
        """Finish the cut-short releases (see `Resumer`), if this replica leads."""
        if not self.leader.is_leader():
            return []
        try:
            return self.resumer.run(self.leader.is_leader, self.on_resumed, self.on_error)
        except Exception as exc:  # listing the cases failed (Redis down): next tick
            _call("on_error", self.on_error, "resume", exc)
            return []

    def _leadership(self, leading: bool) -> None:
        """On becoming leader: a resume pass now (it notes where each cut-short release
        stands) and one just after the stall window (it finishes those that did not move),
        whatever `resume_every_s` is."""
        if not (leading and self._started):
            return
        from apscheduler.triggers.date import DateTrigger  # type: ignore[import-untyped]

        later = datetime.now(UTC) + timedelta(seconds=self.resumer.stall_s + 0.05)
        try:
            self._aps.add_job(
                self.resume_unfinished, id="resume-now", name="resume-now", replace_existing=True
            )
            self._aps.add_job(
                self.resume_unfinished,
                DateTrigger(later, timezone=UTC),
                id="resume-after-stall",
                name="resume-after-stall",
                replace_existing=True,
                misfire_grace_time=max(1, int(self.resume_every_s)),
            )
        except Exception as exc:  # stopping meanwhile: the next leader does it
            logs.event(
                _log,
                "resume_not_scheduled",
                logging.WARNING,
                error=f"{type(exc).__name__}: {exc}"[:200],
            )


def _background_scheduler(**options: Any) -> Any:
    """APScheduler's BackgroundScheduler, less one race of its shutdown: `shutdown()` marks the
    scheduler stopped before it takes the job-store lock, so a one-shot job (the resume passes
    on becoming leader) that its thread is processing at that moment is looked up among the
    pending jobs, is not found, and `JobLookupError` kills that thread. Stopping anyway, the
    job needs no removing."""
    from apscheduler.jobstores.base import JobLookupError  # type: ignore[import-untyped]
    from apscheduler.schedulers.background import (  # type: ignore[import-untyped]
        BackgroundScheduler,
    )
    from apscheduler.schedulers.base import STATE_STOPPED  # type: ignore[import-untyped]

    class Background(BackgroundScheduler):  # type: ignore[misc]
        def remove_job(self, job_id: str, jobstore: str | None = None) -> None:
            try:
                super().remove_job(job_id, jobstore)
            except JobLookupError:
                if self.state != STATE_STOPPED:
                    raise

    return Background(**options)


def _call(name: str, callback: Callable[..., None] | None, *args: Any) -> None:
    """A caller's callback: its failure is logged, never taken for the job's."""
    if callback is None:
        return
    try:
        callback(*args)
    except Exception as exc:
        logs.event(
            _log,
            "scheduler_callback_failed",
            logging.ERROR,
            callback=name,
            error=f"{type(exc).__name__}: {exc}"[:300],
        )
