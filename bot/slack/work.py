"""lockguard's own worker pool: everything a listener does after its `ack()`, so a slow Redis or
a rate-limited Slack can fill this pool but never delays an ack. A job that raises (a bug) is
logged, secrets scrubbed, never shown in Slack.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor

from bot.core import logs

WORKERS = 8
_log = logs.logger("slack.work")


class Work:
    def __init__(self, executor: Executor | None = None) -> None:
        self.executor = (
            executor
            if executor is not None
            else ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="lockguard-slack")
        )

    def submit(self, name: str, job: Callable[[], object]) -> Future[None]:
        def guarded() -> None:
            try:
                job()
            except Exception as exc:  # a bug
                logs.event(
                    _log,
                    "job_failed",
                    logging.ERROR,
                    job=name,
                    error=f"{type(exc).__name__}: {exc}"[:500],
                )

        return self.executor.submit(guarded)

    def shutdown(self, *, wait: bool = True) -> None:
        """Jobs running finish (a release is never cut off half-way); queued ones are dropped:
        their clicks can be made again, cases wait in Redis."""
        self.executor.shutdown(wait=wait, cancel_futures=True)
