"""What the guard says about itself (`/lockguard status`, the Home tab, the digest)."""

from __future__ import annotations

import redis

from bot.core.errors import LockguardError
from bot.engine import Engine
from bot.ops.digests import DigestLedger, Tally
from bot.ops.health import OVERDUE, Health
from bot.ops.leader import Leader
from bot.ops.scheduler import Scheduler
from bot.ops.watches import WatchState as Watched
from bot.slack.blocks.digest import digest_message
from bot.slack.blocks.guard import GuardHealth, GuardSnapshot, WatchState
from bot.slack.blocks.kit import Message

#: Cases a digest reports on.
DIGEST_CASES = 500


def shown_watch(state: Watched) -> WatchState:
    """As the digest and the Home tab show it."""
    return WatchState(
        key_text=state.watch.key.decode("utf-8", "replace"),
        age_seconds=state.age_seconds,
        max_age_seconds=state.watch.max_age_seconds,
        overdue=state.overdue,
        problem=state.problem if state.updated_ms is None else "",
    )


class SelfReport:
    def __init__(
        self,
        engine: Engine,
        health: Health,
        ledger: DigestLedger,
        leader: Leader,
        scheduler: Scheduler,
    ) -> None:
        self.engine = engine
        self.health = health
        self.ledger = ledger
        self.leader = leader
        self.scheduler = scheduler

    def snapshot(self, tally: Tally | None = None) -> GuardSnapshot:
        """The guard now (never raises: what Redis did not answer is shown as unknown)."""
        report = self.health.check()
        if tally is None:
            try:
                tally = self.ledger.read()
            except LockguardError:
                tally = Tally()
        try:
            holder = self.leader.holder()
        except redis.RedisError:
            holder = None
        nxt = self.scheduler.next_run_times()
        health = GuardHealth(
            scans_ok=tally.scans_ok,
            scans_failed=tally.scans_failed,
            last_success_ms=report.last_scan_ms,
            next_scan_ms=nxt["scan"],
            leader=holder.replica if holder is not None else "",
            overdue=report.scans == OVERDUE,
            watches=tuple(shown_watch(w) for w in report.watches),
        )
        return GuardSnapshot(
            health,
            self.scheduler.scan_schedule.describe(),
            self.scheduler.digest_schedule.describe(),
            nxt["digest"],
            self.leader.replica,
            holder is not None and holder.me,
        )

    def digest(self) -> tuple[Message, Tally, int]:
        """The digest message, the ledger it reports, and the server time it was made at."""
        tally = self.ledger.read()
        snap = self.snapshot(tally)
        status = self.engine.status()
        message = digest_message(
            status.last_scan,
            self.engine.cases(DIGEST_CASES),
            snap.health,
            endpoint=self.engine.endpoint,
            now_ms=status.server_time_ms,
            since_ms=tally.since_ms,
        )
        return message, tally, status.server_time_ms
