"""lockguard's own worker pool: everything a listener does after its `ack()`.

Bolt runs each listener on a pool of 5 threads and answers Slack once `ack()` is called. A
listener here only acks and hands the rest (the scan, the approval and release, every Slack call
but `views.open`) to this pool, so a slow Redis or a rate-limited Slack can fill this pool but
never delays an ack.

A job that raises (a bug: listeners turn every expected failure into a reply) is logged with
its name and the error's type and words, secrets scrubbed by the log handler; never to Slack.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor

from bot.core import logs

WORKERS = 8
_log = logs.logger("slack.work")


def default_executor(workers: int = WORKERS) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lockguard-slack")


class Work:
    def __init__(self, executor: Executor | None = None) -> None:
        self.executor = executor if executor is not None else default_executor()

    def submit(self, name: str, job: Callable[[], object]) -> Future[None]:
        def guarded() -> None:
            try:
                job()
            except Exception as exc:  # a bug: logged (secrets scrubbed), never shown in Slack
                logs.event(
                    _log,
                    "job_failed",
                    logging.ERROR,
                    job=name,
                    error=f"{type(exc).__name__}: {exc}"[:500],
                )

        return self.executor.submit(guarded)

    def shutdown(self, *, wait: bool = True) -> None:
        """Jobs already running finish (a release is never cut off half-way by us); jobs still
        queued are dropped: their clicks can be made again, cases wait in Redis."""
        self.executor.shutdown(wait=wait, cancel_futures=True)
