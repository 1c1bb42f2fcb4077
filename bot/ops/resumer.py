"""The resume of cut-short releases (the approving process killed mid-release), on every replica,
exactly as `lockguard approve --resume` does it, as the original approver. A case marked as leased
whose release lease (`bot.cases.release_lease`) lapsed has lost its releaser and is resumed at the
next pass; one never marked as leased (its lease refused, busy or not markable, or an older
lockguard released it) once its recorded outcomes have not moved for `stall_s`. Every replica looks,
not only the leader, whose lease can take far longer to lapse: the release lease lets one resume of
a case run at a time, and even a wrong guess releases nothing and publishes no event twice (the
release script skips every lock with an outcome). A failed resume waits `stall_s` times its
attempts. Dry run on: nothing is resumed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from bot.cases.approval import ApprovalReport
from bot.cases.case import Case, State
from bot.cases.release_lease import HELD, LAPSED, NEVER, ReleaseBusyError
from bot.core import logs
from bot.core.errors import CaseError
from bot.engine import Engine

#: How often each replica looks, and how long a case never seen leased must make no progress.
RESUME_EVERY_S = 2.0
RESUME_STALL_S = 10.0
#: The most recent cases looked at (one scan opens at most one case).
RESUME_WINDOW = 50
#: Resumes of one case this process tries before leaving it to a person (`approve --resume`).
RESUME_ATTEMPTS = 3
#: Who resumes a case whose record names no approver (should not happen).
FALLBACK_ACTOR = "lockguard-scheduler"

ErrorCallback = Callable[[str, BaseException], None]
ResumedCallback = Callable[[ApprovalReport], None]
_log = logs.logger("scheduler")


def unfinished(case: Case) -> bool:
    """Approved (not in dry run), or incomplete with a lock that has no outcome (one whose every
    lock has one ended with errors and waits for a person's `--resume`)."""
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
        attempts: int = RESUME_ATTEMPTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.stall_s = stall_s
        self.attempts = attempts
        self._clock = clock
        #: case id -> (progress seen, when it was first seen so)
        self._seen: dict[str, tuple[tuple[Any, ...], float]] = {}
        #: case id -> no resume before (after a failed one)
        self._not_before: dict[str, float] = {}
        self._tries: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._said_dry_run = False

    def due(self) -> list[Case]:
        """Unleased now though seen leased, or unleased with no progress for `stall_s`."""
        if self.engine.config.dry_run:
            if not self._said_dry_run:
                self._said_dry_run = True
                logs.event(
                    _log, "resume_off", reason="dry run is on: a resumed release would touch locks"
                )
            return []
        now = self._clock()
        candidates = [
            c
            for c in self.engine.cases(RESUME_WINDOW)
            if unfinished(c) and self._tries[c.id] < self.attempts
        ]
        leases = self.engine.release_leases([c.id for c in candidates]) if candidates else {}
        out = [c for c in candidates if self._is_due(c, leases.get(c.id, NEVER), now)]
        live = {c.id for c in candidates}
        for gone in set(self._seen) - live:
            del self._seen[gone]
        return out

    def _is_due(self, case: Case, lease: str, now: float) -> bool:
        if now < self._not_before.get(case.id, now):
            return False  # a resume of it failed just now: not again at once
        if lease == HELD:
            self._seen.pop(case.id, None)
            return False
        if lease == LAPSED:
            return True  # its releaser held the lease and stopped renewing it: gone
        progress = (case.state.value, case.decided_ms, tuple(sorted(case.outcome_counts.items())))
        seen = self._seen.get(case.id)
        if seen is None or seen[0] != progress:
            self._seen[case.id] = (progress, now)
            return False
        return now - seen[1] >= self.stall_s

    def run(
        self,
        still: Callable[[], bool],
        on_resumed: ResumedCallback | None,
        on_error: ErrorCallback,
    ) -> list[ApprovalReport]:
        """One pass, finishing each due case while `still()`."""
        if not self._lock.acquire(blocking=False):
            return []  # a pass is running already
        try:
            reports: list[ApprovalReport] = []
            for case in self.due():
                if not still():
                    break
                report = self._finish(case, on_error)
                if report is not None:
                    reports.append(report)
                    call("on_resumed", on_resumed, report)
            return reports
        finally:
            self._lock.release()

    def _finish(self, case: Case, on_error: ErrorCallback) -> ApprovalReport | None:
        self._seen.pop(case.id, None)
        actor = case.decided_by or FALLBACK_ACTOR
        try:
            self._tries[case.id] += 1
            self._started(case, actor)
            report = self.engine.approve(case.id, actor, resume=True)
        except ReleaseBusyError as exc:  # another replica took it up first
            self._tries[case.id] -= 1
            logs.event(_log, "resume_skipped", case_id=case.id, reason=str(exc)[:200])
            return None
        except Exception as exc:
            if isinstance(exc, CaseError) and self._finished_meanwhile(case.id):
                logs.event(_log, "resume_skipped", case_id=case.id, reason="finished meanwhile")
                return None
            self._not_before[case.id] = self._clock() + self.stall_s * self._tries[case.id]
            if self._tries[case.id] >= self.attempts:
                logs.event(
                    _log,
                    "resume_gave_up",
                    logging.ERROR,
                    case_id=case.id,
                    attempts=self._tries[case.id],
                    hint=f"lockguard approve {case.id} --by NAME --resume",
                )
            call("on_error", on_error, "resume", exc)
            return None
        logs.event(
            _log,
            "resume_finished",
            case_id=case.id,
            state=report.case.state.value,
            outcomes=report.counts,
        )
        return report

    def _started(self, case: Case, actor: str) -> None:
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

    def _finished_meanwhile(self, case_id: str) -> bool:
        """Another replica's resume ended it just now."""
        try:
            return not unfinished(self.engine.case(case_id))
        except Exception:
            return False


def call(name: str, callback: Callable[..., None] | None, *args: Any) -> None:
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
