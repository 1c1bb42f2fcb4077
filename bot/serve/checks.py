"""The health checks' loop (one per process, a fleet's targets share it) and each target's Redis
alarm."""

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
    """A check that cannot reach Redis alerts it, and the next that reaches it clears it: with no
    scan running (no leader while Redis is down, or scans off) nothing else would say so. Only
    the replica that led when Redis last answered alerts (every replica, before any answer)."""

    def __init__(self, health: Health, leader: Leader) -> None:
        self.health = health
        self.leader = leader
        self._raised = False
        self._led: bool | None = None  # whether this replica led at the last check Redis answered
        leader.on_change(self._took_lead)

    def _took_lead(self, leading: bool) -> None:
        """Taking the lease, Redis answered: this replica alerts if Redis goes before the next
        check that reaches it (else a Redis lost just after a takeover is alerted by no one)."""
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
