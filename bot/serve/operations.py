"""The always-on side of `lockguard serve` for one target (one Redis), wired to the Slack app:
schedules on the replica holding its lease, the webhook scan, health and silence alarms, metrics
(`bot.serve.fleet_operations` composes every target's and serves the routes).

A scheduled or webhook scan is counted (metrics, the digest's ledger), clears its failure alert
and posts its findings as `bot.slack.announcer` says; a failed one is counted and alerted. The
Notifier shows one outage (Redis, failing scans, scans overdue, the digest) as one message,
updated in place, and one recovery.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from bot.cases.approval import ApprovalReport
from bot.cases.case import Case
from bot.config import Settings
from bot.core import logs
from bot.core.errors import LockguardError, ScanBusyError
from bot.engine import Engine
from bot.ops.digests import DigestLedger
from bot.ops.health import OVERDUE, Health, HealthReport, SilenceAlarm
from bot.ops.leader import Leader
from bot.ops.metrics import Metrics
from bot.ops.resumer import RESUME_EVERY_S, RESUME_STALL_S
from bot.ops.scheduler import Scheduler
from bot.ops.watches import parse_watches
from bot.ops.webhook import scan_runner
from bot.scan.result import ScanResult
from bot.serve.checks import RedisAlarm
from bot.serve.self_report import SelfReport
from bot.serve.voice import Voice
from bot.slack.app import SlackApp
from bot.slack.blocks.guard import GuardSnapshot
from bot.slack.commands import LISTED

#: Seconds between two health checks (silence alarm, `lockguard_cases`) on each replica.
CHECK_EVERY_S = 30.0
#: Cases the metrics count.
METRIC_CASES = 200
_log = logs.logger("operations")


@dataclass(frozen=True, slots=True)
class Tuning:
    """Timings `serve` takes from its settings and constants; tests shorten them."""

    lease_ms: int | None = None  # None: LOCKGUARD_LEADER_LEASE_SECONDS
    check_every_s: float = CHECK_EVERY_S
    resume_every_s: float = RESUME_EVERY_S
    resume_stall_s: float = RESUME_STALL_S
    replica: str | None = None  # None: hostname:pid


@dataclass(frozen=True, slots=True)
class Part:
    """What one target shares with the fleet: its lease is kept by the fleet's heartbeat, its
    jobs run on the fleet's one APScheduler, and the fleet runs its health checks."""

    name: str
    leader: Leader
    aps: Any


class Operations:
    """The `Guard` of the Slack app (`bot.slack.blocks.guard`) and everything that runs unasked,
    for one target of the fleet (`part`)."""

    def __init__(self, engine: Engine, settings: Settings, tuning: Tuning, part: Part) -> None:
        self.engine = engine
        self.name = part.name
        self.settings = settings
        self.metrics = Metrics(target=self.name)
        self.leader = part.leader
        self.leader.on_change(self.metrics.leader)
        scans, digests = settings.scan_schedule_spec, settings.digest_schedule_spec
        self.scheduler = Scheduler(
            engine,
            self.leader,
            scans,
            digests,
            lambda r, c: self._completed("schedule", r, c),
            self.post_digest,
            self._job_failed,
            on_resumed=self._resumed,
            resume_every_s=tuning.resume_every_s,
            resume_stall_s=tuning.resume_stall_s,
            scan_keep=LISTED,
            aps=part.aps,
            name=part.name,
        )
        self.health = Health(engine, scans.interval_seconds(), parse_watches(settings.watches))
        self.voice = Voice()
        self.up = True  # whether Redis answered the last check (unknown: assumed)
        self.alarm = SilenceAlarm(engine, self.voice.alert, self.voice.recovered)
        self.ledger = DigestLedger(engine)
        self.report = SelfReport(engine, self.health, self.ledger, self.leader, self.scheduler)
        self.redis_alarm = RedisAlarm(self.health, self.leader)
        self.webhook_key = _revealed(settings.webhook_key)
        self.metrics_token = _revealed(settings.metrics_token)

    # -- lifecycle ---------------------------------------------------------------------------

    def attach(self, slack: SlackApp, *, fleet: bool = False, **voice: Any) -> None:
        """`voice`: `separate`, `shown_as` (`Voice.attach`); `fleet`: its cases' clicks are
        routed to it."""
        route = (self.name, lambda: self.up) if fleet else None
        self.voice.attach(self.engine, self.settings, slack, routed=route, guard=self, **voice)

    def webhook_scan(self) -> Callable[[], dict[str, Any]]:
        """One webhook scan of this Redis, counted and posted."""
        return scan_runner(
            self.engine,
            on_result=lambda r, c: self._completed("webhook", r, c),
            on_error=self._webhook_failed,
        )

    def check(self) -> HealthReport:
        """One health check: the silence alarm acts on it, `lockguard_cases` is refreshed."""
        report = self.health.check()
        self.alarm.observe(report)
        self.up = not report.redis_error
        self.metrics.target_up(self.up)
        self.metrics.scans_overdue(report.scans == OVERDUE)
        if self.voice.attached:  # after the silence alarm: scans overdue join the outage
            self.redis_alarm.observe(report, self.voice.notifier)
        if not report.redis_error:
            try:
                self.metrics.cases(self.engine.cases(METRIC_CASES), report.checked_ms)
            except LockguardError as exc:
                logs.event(_log, "metrics_cases_failed", error=str(exc)[:200])
        return report

    # -- the Guard: what the Slack app feeds and shows ---------------------------------------

    def scan_done(self, trigger: str, result: ScanResult) -> None:
        self.metrics.scan_done(trigger, result)
        self.ledger.count(True)

    def scan_failed(self, trigger: str) -> None:
        self.metrics.scan_failed(trigger)
        self.ledger.count(False)

    def releases(self, counts: Mapping[str, int]) -> None:
        self.metrics.releases(counts)

    def snapshot(self) -> GuardSnapshot:
        return self.report.snapshot()

    # -- the jobs ----------------------------------------------------------------------------

    def post_digest(self) -> None:
        """The digest, posted in the channel now (the digest job; raises when it cannot)."""
        message, reported, now_ms = self.report.digest()
        self.voice.speaker.digest(message)
        self.ledger.posted(now_ms, reported)
        self.voice.notifier.resolve("digest", "the digest is posted again")

    def _completed(self, trigger: str, result: ScanResult, case: Case | None) -> None:
        self.scan_done(trigger, result)
        self.voice.notifier.scan_ok(trigger)
        self.voice.speaker.findings(trigger, result, case)

    def _job_failed(self, job: str, exc: BaseException) -> None:
        if job != "schedule":
            self.voice.job_failed(job, exc)
            return
        self.scan_failed("schedule")
        self.voice.notifier.scan_failed("schedule", exc)

    def _webhook_failed(self, exc: BaseException) -> None:
        if isinstance(exc, ScanBusyError):
            return  # the scan that holds the tenure records itself; the caller gets 503
        self.scan_failed("webhook")
        self.voice.notifier.scan_failed("webhook", exc)

    def _resumed(self, report: ApprovalReport) -> None:
        self.releases(report.counts)
        self.voice.speaker.resumed(report)


def _revealed(secret: SecretStr | None) -> str | None:
    return secret.get_secret_value() if secret else None
