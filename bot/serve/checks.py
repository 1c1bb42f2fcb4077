"""The health checks' loop and the Redis alarm of `lockguard serve` (`bot.serve.operations`):
one loop per process (a fleet's targets share it), and an alarm per target."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from bot.core import logs
from bot.ops.health import Health, HealthReport
from bot.ops.leader import Leader
from bot.slack.alerts import REDIS, Notifier

_log = logs.logger("operations")


class CheckLoop:
    """`check()` at once and then every `every` seconds on a daemon thread, until `stop()`."""

    def __init__(self, check: Callable[[], object], every: float) -> None:
        self._check = check
        self.every = every
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._stopping.clear()
            self._thread = threading.Thread(target=self._run, name="lockguard-checks", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._check()
            except Exception as exc:  # a bug: the next check tries again
                logs.event(
                    _log, "check_failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}"[:300]
                )
            self._stopping.wait(self.every)


class RedisAlarm:
    """A health check that cannot reach Redis alerts it (as a scan or a click that runs into it
    does), and the first check that reaches it again clears what a check raised: with no scan
    running (no leader while Redis is down, or scans off) nothing else would say so. Redis cannot
    tell the replicas apart meanwhile, so only the one that led when Redis last answered alerts
    (or every replica, when none has reached Redis since it started)."""

    def __init__(self, health: Health, leader: Leader) -> None:
        self.health = health
        self.leader = leader
        self._raised = False
        self._led: bool | None = None  # whether this replica led at the last check Redis answered
        leader.on_change(self._took_lead)

    def _took_lead(self, leading: bool) -> None:
        """Leading now: Redis answered (it gave this replica the lease), and this replica is
        the one to alert if Redis goes away before the next check that reaches it. Without
        this, a Redis lost within one check interval of taking the lease was alerted by no
        one: the last check that reached Redis had seen this replica not leading."""
        if leading:
            self._led = True

    def observe(self, report: HealthReport, notifier: Notifier) -> None:
        if not report.redis_error:
            self._led = self.leader.is_leader()
            if self._raised:
                self._raised = False
                notifier.resolve(REDIS, "Redis answers again")
        elif self.health.last_error is not None and self._led is not False:
            notifier.redis_unavailable(self.health.last_error)
            self._raised = True
