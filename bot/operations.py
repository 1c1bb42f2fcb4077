"""The always-on side of `lockguard serve`: schedules on one active replica, the webhook, silence
alarms, health and metrics, composed from their parts and wired to the Slack app.

    ops = Operations(engine, settings)                   # builds; no Redis call, no thread
    slack = build_slack_app(engine, settings, guard=ops)  # status, Home tab, slash metrics
    ops.attach(slack)                                     # where it speaks: the channel
    HttpServer(host, port, [*ops.routes(), ...])          # /hooks/scan, /healthz, /metrics
    ops.start()                                           # the lease, the schedules, the checks
    ops.stop()                                            # schedules (lease given back), checks

How the parts are wired:
- `Leader` (`bot.ops.leader`) with `LOCKGUARD_LEADER_LEASE_SECONDS`; its changes set
  `lockguard_scheduler_leader`.
- `Scheduler` (`bot.ops.scheduler`) on `LOCKGUARD_SCAN_SCHEDULE` /
  `LOCKGUARD_DIGEST_SCHEDULE` (`off`: no job). A scheduled scan is counted (metrics, the digest's
  ledger), clears the `scan:schedule` alert, and posts its findings in `LOCKGUARD_SLACK_CHANNEL` as
  `bot.slack.announcer` says (a healthy scan posts nothing; the engine has recorded it). A failed
  one is counted and alerted (`Notifier.scan_failed("schedule", error)`). The digest job posts
  `bot.slack.blocks.digest.digest_message`; a release finished after a crash has its case's message
  rewritten and its outcomes counted.
- `POST /hooks/scan` (`bot.ops.webhook`, `LOCKGUARD_WEBHOOK_KEY`): a webhook scan is counted,
  alerted and posted exactly as a scheduled one.
- `Health` (interval: the scan schedule's longest gap; `LOCKGUARD_WATCHES`) serves `GET /healthz`;
  `SilenceAlarm` turns its reports into one alert and one recovery each, through the Notifier,
  and `RedisAlarm` alerts a Redis the check cannot reach. A daemon thread on every replica
  checks every half scan interval (1 s to `CHECK_EVERY_S`; it refreshes `lockguard_cases` too);
  Redis decides which replica announces each transition. The Notifier shows one outage (Redis,
  failing scans, scans overdue, the digest) as one message, updated in place, and one recovery.
- `GET /metrics` (`bot.ops.metrics`). Slash scans and approvals from Slack feed it through the
  `Guard` methods below (`bot.slack.blocks.guard`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import redis
from pydantic import SecretStr

from bot.cases.case import Case
from bot.cases.reclaim import ApprovalReport
from bot.config import Settings
from bot.core import logs
from bot.core.errors import LockguardError, ScanBusyError
from bot.engine import Engine
from bot.http import Route
from bot.ops.digests import DigestLedger, Tally
from bot.ops.health import (
    OVERDUE,
    Health,
    HealthReport,
    SilenceAlarm,
    check_every,
    health_route,
)
from bot.ops.leader import Leader
from bot.ops.metrics import Metrics, metrics_route
from bot.ops.scheduler import RESUME_EVERY_S, RESUME_STALL_S, Scheduler
from bot.ops.watches import WatchState as Watched
from bot.ops.watches import parse_watches
from bot.ops.webhook import scan_runner, webhook_route
from bot.scan.result import ScanResult
from bot.slack.alerts import REDIS, Notifier
from bot.slack.announcer import Announcer
from bot.slack.app import SlackApp
from bot.slack.blocks.digest import GuardHealth, WatchState, digest_message
from bot.slack.blocks.guard import GuardSnapshot
from bot.slack.blocks.kit import Message
from bot.slack.chat import SendError
from bot.slack.commands import LISTED

#: Seconds between two health checks (silence alarm, `lockguard_cases`) on each replica.
CHECK_EVERY_S = 30.0
#: Cases a digest reports on, and the metrics count.
DIGEST_CASES = 500
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


def shown_watch(state: Watched) -> WatchState:
    """A watch as read (`bot.ops.watches`) as the digest and the Home tab show it."""
    return WatchState(
        key_text=state.watch.key.decode("utf-8", "replace"),
        age_seconds=state.age_seconds,
        max_age_seconds=state.watch.max_age_seconds,
        overdue=state.overdue,
        problem=state.problem if state.updated_ms is None else "",
    )


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

    def observe(self, report: HealthReport, notifier: Notifier) -> None:
        if not report.redis_error:
            self._led = self.leader.is_leader()
            if self._raised:
                self._raised = False
                notifier.resolve(REDIS, "Redis answers again")
        elif self.health.last_error is not None and self._led is not False:
            notifier.redis_unavailable(self.health.last_error)
            self._raised = True


class SelfReport:
    """What the guard says about itself: `/lockguard status`, the Home tab, the digest."""

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


class Operations:
    """The `Guard` of the Slack app (`bot.slack.blocks.guard`) and everything that runs unasked."""

    def __init__(self, engine: Engine, settings: Settings, tuning: Tuning | None = None) -> None:
        tuning = tuning or Tuning()
        self.engine = engine
        self.metrics = Metrics()
        self.leader = _leader(engine, settings, tuning)
        self.leader.on_change(self.metrics.leader)
        scans, digests = settings.scan_schedule_spec, settings.digest_schedule_spec
        self.scheduler = Scheduler(
            engine,
            self.leader,
            scans,
            digests,
            self._scheduled,
            self.post_digest,
            self._job_failed,
            on_resumed=self._resumed,
            resume_every_s=tuning.resume_every_s,
            resume_stall_s=tuning.resume_stall_s,
            scan_keep=LISTED,
        )
        self.health = Health(engine, scans.interval_seconds(), parse_watches(settings.watches))
        self.alarm = SilenceAlarm(engine, self._alert, self._recovered)
        self.ledger = DigestLedger(engine)
        self.report = SelfReport(engine, self.health, self.ledger, self.leader, self.scheduler)
        self.checks = CheckLoop(
            self.check, check_every(tuning.check_every_s, scans.interval_seconds())
        )
        self.redis_alarm = RedisAlarm(self.health, self.leader)
        self.webhook_key = _revealed(settings.webhook_key)
        self.metrics_token = _revealed(settings.metrics_token)
        self._slack: SlackApp | None = None
        self._announcer: Announcer | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def attach(self, slack: SlackApp) -> None:
        self._slack = slack
        self._announcer = Announcer(
            self.engine, slack.posts, slack.chat, slack.notifier, slack.notifier.channel
        )

    def routes(self) -> list[Route]:
        run = scan_runner(
            self.engine,
            on_result=lambda r, c: self._completed("webhook", r, c),
            on_error=self._webhook_failed,
        )
        return [
            webhook_route(run, self.webhook_key),
            health_route(self.health),
            metrics_route(self.metrics, self.engine, token=self.metrics_token),
        ]

    def start(self) -> None:
        self.scheduler.start()
        self.checks.start()

    def stop(self, *, release: bool = True) -> None:
        """The schedules first (running jobs finish; the lease is given back unless
        `release=False`), then the checks. Safe to call twice."""
        self.scheduler.stop(release=release)
        self.checks.stop()

    def check(self) -> HealthReport:
        """One health check: the silence alarm acts on it, `lockguard_cases` is refreshed."""
        report = self.health.check()
        self.alarm.observe(report)
        if self._slack is not None:  # after the silence alarm: scans overdue join the outage
            self.redis_alarm.observe(report, self._slack.notifier)
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

    def snapshot(self, tally: Tally | None = None) -> GuardSnapshot:
        return self.report.snapshot(tally)

    # -- the jobs ----------------------------------------------------------------------------

    def post_digest(self) -> None:
        """The digest, posted in the channel now (the digest job; raises when it cannot)."""
        message, reported, now_ms = self.report.digest()
        self._speaker().digest(message)
        self.ledger.posted(now_ms, reported)
        self._slack_app().notifier.resolve("digest", "the digest is posted again")

    def _scheduled(self, result: ScanResult, case: Case | None) -> None:
        self._completed("schedule", result, case)

    def _completed(self, trigger: str, result: ScanResult, case: Case | None) -> None:
        self.scan_done(trigger, result)
        self._slack_app().notifier.scan_ok(trigger)
        self._speaker().findings(trigger, result, case)

    def _job_failed(self, job: str, exc: BaseException) -> None:
        notifier = self._slack_app().notifier
        if job == "schedule":
            self.scan_failed("schedule")
            notifier.scan_failed("schedule", exc)
            return
        logs.event(_log, f"{job}_failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}"[:300])
        notifier.error_seen(exc)
        if job == "digest":
            notifier.raise_alert("digest", "the digest was not posted", _digest_failure(exc))

    def _webhook_failed(self, exc: BaseException) -> None:
        if isinstance(exc, ScanBusyError):
            return  # the scan that holds the lease records itself; the caller gets 503
        self.scan_failed("webhook")
        self._slack_app().notifier.scan_failed("webhook", exc)

    def _resumed(self, report: ApprovalReport) -> None:
        self.releases(report.counts)
        self._speaker().resumed(report)

    def _alert(self, kind: str, title: str, detail: str) -> None:
        notifier = self._slack_app().notifier
        if not notifier.raise_alert(kind, title, detail) and not notifier.is_out(kind):
            raise SendError("chat.postMessage", "alert_not_posted")  # the next check retries

    def _recovered(self, kind: str, title: str) -> None:
        self._slack_app().notifier.resolve(kind, title)

    def _slack_app(self) -> SlackApp:
        if self._slack is None:
            raise RuntimeError("Operations.attach(slack) was not called")
        return self._slack

    def _speaker(self) -> Announcer:
        if self._announcer is None:
            raise RuntimeError("Operations.attach(slack) was not called")
        return self._announcer


def _leader(engine: Engine, settings: Settings, tuning: Tuning) -> Leader:
    """This replica's claim on the leader lease (`LOCKGUARD_LEADER_LEASE_SECONDS`)."""
    lease_ms = tuning.lease_ms or settings.leader_lease_seconds * 1000
    return Leader(engine.client, replica=tuning.replica, lease_ms=lease_ms)


def _revealed(secret: SecretStr | None) -> str | None:
    return secret.get_secret_value() if secret else None


def _digest_failure(exc: BaseException) -> str:
    """Why the digest was not posted, for its alert (never a traceback nor a secret)."""
    if isinstance(exc, LockguardError):
        return str(exc)
    if isinstance(exc, SendError):
        return f"Slack did not take it ({exc.code})"
    return f"an internal error ({type(exc).__name__}); see lockguard's logs"
