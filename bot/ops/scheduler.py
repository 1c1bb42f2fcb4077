"""Scheduled scans, digests and resumes inside `lockguard serve`: a `Scheduler` per target, its
jobs on the fleet's one APScheduler (`shared_scheduler`, UTC; jobs coalesce and never overlap
themselves). A scan or digest tick runs only on the replica holding the target's leader lease, so
several replicas on one Redis run each once; a scan refused because another holds the scan lease
is skipped (that scan records itself). Resume passes run on every replica (`bot.ops.resumer`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.cases.approval import ApprovalReport
from bot.cases.case import Case
from bot.core import logs
from bot.core.errors import ScanBusyError
from bot.engine import Engine
from bot.ops.leader import Leader
from bot.ops.resumer import (
    RESUME_EVERY_S,
    RESUME_STALL_S,
    ErrorCallback,
    ResumedCallback,
    Resumer,
    call,
)
from bot.ops.schedules import Schedule, make_trigger
from bot.scan.result import ScanResult

ScanCallback = Callable[[ScanResult, Case | None], None]
_log = logs.logger("scheduler")


class Scheduler:
    """One target's jobs on `aps`, each id prefixed with `name:`."""

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
        aps: Any,
        name: str,
    ) -> None:
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
        self.aps = aps
        self._prefix = f"{name}:"
        self._started = False
        self._listing_failed = False

    @property
    def is_leader(self) -> bool:
        return self.leader.is_leader()

    def start(self) -> None:
        if self._started:
            return
        for job_id, schedule, func in (
            ("scan", self.scan_schedule, self.run_scan),
            ("digest", self.digest_schedule, self.run_digest),
        ):
            if not schedule.off:
                grace = max(1, int(schedule.interval_seconds() or 1))
                job_id = self._prefix + job_id
                self.aps.add_job(
                    func, make_trigger(schedule), id=job_id, name=job_id, misfire_grace_time=grace
                )
        add_resume_jobs(
            self.aps,
            self.resume_unfinished,
            self.resume_every_s,
            self.resumer.stall_s,
            prefix=self._prefix,
        )
        self._started = True
        logs.event(
            _log,
            "scheduler_started",
            replica=self.leader.replica,
            scan=self.scan_schedule.describe(),
            digest=self.digest_schedule.describe(),
        )

    def stop(self) -> None:
        """Safe to call twice."""
        from apscheduler.jobstores.base import JobLookupError  # type: ignore[import-untyped]

        if self._started:
            self._started = False
            for job in self.aps.get_jobs():
                if job.id.startswith(self._prefix):
                    with suppress(JobLookupError):  # a one-shot job that has just run
                        self.aps.remove_job(job.id)

    def next_run_times(self) -> dict[str, int | None]:
        """`scan` and `digest` -> epoch ms of the next run (None when off), whoever leads then."""
        out: dict[str, int | None] = {}
        now = datetime.now(UTC)
        for job_id, schedule in (("scan", self.scan_schedule), ("digest", self.digest_schedule)):
            job = self.aps.get_job(self._prefix + job_id) if self._started else None
            when: datetime | None = None
            if job is not None:
                when = job.next_run_time
            elif not schedule.off:
                when = make_trigger(schedule).get_next_fire_time(None, now)
            out[job_id] = int(when.timestamp() * 1000) if when is not None else None
        return out

    # -- the jobs (public: serve and tests may run one now) -----------------------------------

    def run_scan(self) -> bool:
        """If this replica leads. True when it ran and completed."""
        if not self.leader.is_leader():
            return False
        try:
            result, case = self.engine.scan("schedule", keep=self.scan_keep)
        except ScanBusyError as exc:
            logs.event(_log, "scheduled_scan_skipped", reason=str(exc)[:200])
            return False
        except Exception as exc:
            call("on_error", self.on_error, "schedule", exc)
            return False
        call("on_scan_result", self.on_scan_result, result, case)
        return True

    def run_digest(self) -> bool:
        """If this replica leads. True when `on_digest` returned."""
        if not self.leader.is_leader():
            return False
        try:
            self.on_digest()
        except Exception as exc:
            call("on_error", self.on_error, "digest", exc)
            return False
        return True

    def resume_unfinished(self) -> list[ApprovalReport]:
        try:
            reports = self.resumer.run(self._running, self.on_resumed, self.on_error)
        except Exception as exc:  # listing the cases failed (Redis down): next tick
            if not self._listing_failed:  # said once per outage, not every 2 s
                call("on_error", self.on_error, "resume", exc)
            self._listing_failed = True
            return []
        self._listing_failed = False
        return reports

    def _running(self) -> bool:
        """While the scheduler runs (or was never started: a test's own call)."""
        return self._started or not self.aps.running


def add_resume_jobs(
    aps: Any, run: Callable[[], object], every_s: float, stall_s: float, *, prefix: str = ""
) -> None:
    """`run` every `every_s`, and two passes at start: now (noting where each cut-short release
    stands) and just after the stall window (finishing those that did not move)."""
    from apscheduler.triggers.date import DateTrigger  # type: ignore[import-untyped]
    from apscheduler.triggers.interval import IntervalTrigger  # type: ignore[import-untyped]

    later = datetime.now(UTC) + timedelta(seconds=stall_s + 0.05)
    for job_id, trigger in (
        ("resume", IntervalTrigger(seconds=every_s, timezone=UTC)),
        ("resume-now", None),
        ("resume-after-stall", DateTrigger(later, timezone=UTC)),
    ):
        aps.add_job(
            run,
            trigger,
            id=prefix + job_id,
            name=prefix + job_id,
            misfire_grace_time=max(1, int(every_s)),
            replace_existing=True,
        )


def shared_scheduler(workers: int) -> Any:
    """A BackgroundScheduler in UTC with `workers` threads whatever the number of jobs (a job
    waits for a free thread)."""
    from apscheduler.executors.pool import ThreadPoolExecutor  # type: ignore[import-untyped]

    # APScheduler's own info lines ("Adding job tentatively") say nothing an operator acts on
    logs.logger("apscheduler").setLevel(logging.WARNING)
    return _background_scheduler(
        timezone=UTC,
        executors={"default": ThreadPoolExecutor(max(1, workers))},
        job_defaults={"coalesce": True, "max_instances": 1},
        logger=logs.logger("apscheduler"),
    )


def _background_scheduler(**options: Any) -> Any:
    """Less one shutdown race: `shutdown()` marks the scheduler stopped before it takes the
    job-store lock, so a one-shot job processed meanwhile is not found and `JobLookupError`
    kills its thread. Once stopped, the job needs no removing."""
    from apscheduler.jobstores.base import JobLookupError
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
