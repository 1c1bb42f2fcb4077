"""`lockguard serve`'s always-on side over the fleet (`LOCKGUARD_TARGETS_FILE`; without one, the
environment's Redis as a fleet of one): an `Operations` per target on its own Redis, sharing one
lease heartbeat (`bot.ops.shards`), one APScheduler of `JOB_THREADS` threads, a check loop on
`CHECK_THREADS` and one `/metrics`. `/healthz` and `/lockguard status` show each target's last
report and its age, never sending anything to a target's Redis however often they are asked.

Without a targets file (`bot.fleet.results.alone`, the one place that tells the two apart) the
one target is served as one Redis: `/healthz` checks it at each request, the webhook ignores
`target`, its own digest is posted, and its Slack messages name no target.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from bot.cases.case import State
from bot.config import Settings
from bot.core.errors import LockguardError
from bot.engine import Engine
from bot.fleet import Target
from bot.fleet.results import alone
from bot.ops.fleet_health import TargetHealth, aged, fleet_health, stale_after
from bot.ops.health import HealthReport, check_every, health_route
from bot.ops.http_server import Request, Route
from bot.ops.leader import Leader, replica_id
from bot.ops.metrics import FleetMetrics, metrics_route, refresh_last_scan
from bot.ops.scheduler import shared_scheduler
from bot.ops.shards import Shards
from bot.ops.webhook import webhook_route
from bot.serve.checks import CheckLoop
from bot.serve.fleet_webhook import fleet_webhook
from bot.serve.operations import Operations, Part, Tuning
from bot.serve.self_report import DIGEST_CASES
from bot.slack.app import SlackApp
from bot.slack.blocks.digest import TargetDigest, fleet_digest_message
from bot.slack.blocks.home import OPEN_STATES, TargetHome
from bot.slack.blocks.status import TargetLine
from bot.slack.chat import Chat

#: Threads the fleet's scheduled jobs share (scans, digests, resumes of every target).
JOB_THREADS = 8
#: Threads the health checks of the fleet's targets share.
CHECK_THREADS = 8
#: Recent cases each target's Home tab section looks at (the open ones are counted).
HOME_CASES = 200
_T = TypeVar("_T")


class FleetOperations:
    def __init__(
        self,
        targets: Sequence[Target],
        engines: Mapping[str, Engine],
        settings: Settings,
        tuning: Tuning | None = None,
    ) -> None:
        if not targets:
            raise ValueError("a fleet has at least one target")
        tuning = tuning or Tuning()
        lease_ms = tuning.lease_ms or settings.leader_lease_seconds * 1000
        replica = tuning.replica or replica_id()
        self.targets = list(targets)
        #: No targets file: served as one Redis.
        self.alone = alone(self.targets)
        self.concurrency = settings.target_concurrency
        leaders = {
            t.name: Leader(engines[t.name].client, lease_ms=lease_ms, replica=replica)
            for t in self.targets
        }
        self.shards = Shards(leaders, lease_ms=lease_ms, replica=replica)
        self.aps = shared_scheduler(JOB_THREADS)
        self.parts = {  # one digest job, the first target's (`post_digest`): the others' off
            t.name: Operations(
                engines[t.name],
                t.settings.model_copy(
                    update={"digest_schedule": settings.digest_schedule if i == 0 else "off"}
                ),
                tuning,
                Part(t.name, leaders[t.name], self.aps),
            )
            for i, t in enumerate(self.targets)
        }
        for name, part in self.parts.items():  # its health checks say what its Redis refused
            part.health.lease_refused = _refusal(self.shards.visitor.refused, name)
        #: The target the Slack app acts on (its engine is the app's).
        self.home = self.parts[self.targets[0].name]
        self.home.scheduler.on_digest = self.post_digest
        self.channel = settings.slack_channel or ""
        self.chat: Chat | None = None
        self.metrics = FleetMetrics(p.metrics for p in self.parts.values())
        self._scans = {name: part.webhook_scan() for name, part in self.parts.items()}
        self._fleet_webhook = fleet_webhook(self.targets, self._scans, self.concurrency)
        every = min(
            check_every(tuning.check_every_s, t.settings.scan_schedule_spec.interval_seconds())
            for t in self.targets
        )
        self.checks = CheckLoop(self.check, every)
        #: Each target's last health check and when it ended (`time.monotonic()`).
        self._last: dict[str, tuple[HealthReport, float]] = {}
        self._last_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(
            min(CHECK_THREADS, len(self.targets)), thread_name_prefix="lockguard-fleet-checks"
        )

    def attach(self, slack: SlackApp) -> None:
        self.chat = slack.chat
        if self.alone:  # its messages name no target; no click needs routing
            self.home.attach(slack)
            return
        for target in self.targets:
            part = self.parts[target.name]
            part.attach(
                slack, fleet=True, separate=part is not self.home, shown_as=shown_as(target)
            )
        slack.commands.targets.lines = self.target_lines
        slack.commands.targets.homes = self.target_homes

    def routes(self) -> list[Route]:
        return [
            webhook_route(self.webhook, self.home.webhook_key),
            health_route(self.health),
            metrics_route(self.metrics, self._refresh, token=self.home.metrics_token),
        ]

    def webhook(self, request: Request) -> dict[str, Any]:
        """Alone, its one scan's summary (`target` is not read); else `{"targets": [...]}`."""
        if self.alone:
            return self._scans[self.home.name]()
        return self._fleet_webhook(request)

    def start(self) -> None:
        for part in self.parts.values():
            part.scheduler.start()  # adds its jobs to the shared scheduler
        self.aps.start()
        self.shards.start()
        self.checks.start()

    def stop(self, *, release: bool = True) -> None:
        """The jobs first (running ones finish), then the leases (given back unless
        `release=False`), then the checks. Safe to call twice."""
        for part in self.parts.values():
            part.scheduler.stop()
        if self.aps.running:
            self.aps.shutdown(wait=True)
        self.shards.stop(release=release)
        self.checks.stop()
        self._pool.shutdown(wait=True)

    def check(self) -> list[HealthReport]:
        """Every target's health check, concurrently, each report kept for `last_health`."""
        return self._each(self._check_part)

    def _check_part(self, part: Operations) -> HealthReport:
        report = part.check()
        with self._last_lock:
            self._last[part.name] = (report, time.monotonic())
        return report

    def health(self) -> tuple[int, dict[str, Any]]:
        """Alone, its Redis checked now (`Health.answer`); else every target's last check."""
        if self.alone:
            return self.home.health.answer()
        return fleet_health(self.last_health(), stale_after(self.checks.every))

    def last_health(self) -> list[TargetHealth]:
        """From memory: no Redis call."""
        now, limit = time.monotonic(), stale_after(self.checks.every)
        with self._last_lock:
            last = dict(self._last)
        return [aged(t.name, t.labels, last.get(t.name), now, limit) for t in self.targets]

    def post_digest(self) -> None:
        """Alone, its Redis's own digest; else the fleet's one digest in the channel, the
        targets grouped by their `team` label. Raises when it cannot post."""
        if self.alone:
            self.home.post_digest()
            return
        if self.chat is None:
            raise RuntimeError("FleetOperations.attach(slack) was not called")
        lines = self.each_target(self._digest_line)
        self.chat.post(self.channel, fleet_digest_message(lines, now_ms=int(time.time() * 1000)))
        self.home.voice.notifier.resolve("digest", "the digest is posted again")

    def _digest_line(self, target: Target) -> TargetDigest:
        engine = self.parts[target.name].engine
        team = target.labels.get("team", "")
        try:
            status = engine.status()
            now = status.server_time_ms
            cases = engine.cases(DIGEST_CASES)
        except LockguardError as exc:
            return TargetDigest(target.name, team, None, 0, problem=str(exc)[:120])
        pending = sum(1 for c in cases if c.effective_state(now) is State.PENDING)
        return TargetDigest(target.name, team, status.last_scan, pending)

    def target_lines(self) -> list[TargetLine]:
        """For `/lockguard status`: each target's last check, and whether this replica leads it."""
        return [
            TargetLine(
                h.name,
                ", ".join(f"{k}={v}" for k, v in h.labels.items()),
                up=h.up,
                last_scan_ms=h.report.last_scan_ms if h.report is not None else None,
                leading=self.parts[h.name].leader.is_leader(),
                problem=h.reasons[0][:120] if h.reasons else "",
            )
            for h in self.last_health()
        ]

    def target_homes(self) -> list[TargetHome]:
        """For the Home tab: each target's last scan and open cases, or why not."""
        return self.each_target(self._home)

    def _home(self, target: Target) -> TargetHome:
        engine = self.parts[target.name].engine
        shown = (target.name, target.label_text(), target.redis)
        try:
            status = engine.status()
            cases = engine.cases(HOME_CASES)
        except LockguardError as exc:
            return TargetHome(*shown, problem=str(exc)[:300])
        now = status.server_time_ms
        live = sum(1 for c in cases if c.effective_state(now) in OPEN_STATES and not c.dry_run)
        return TargetHome(*shown, last_scan=status.last_scan, open_cases=live)

    def _refresh(self) -> None:
        self._each(lambda p: refresh_last_scan(p.metrics, p.engine))

    def _each(self, work: Callable[[Operations], _T]) -> list[_T]:
        if len(self.parts) == 1:  # on the calling thread: no hand-over for one
            return [work(self.home)]
        return list(self._pool.map(work, self.parts.values()))

    def each_target(self, work: Callable[[Target], _T]) -> list[_T]:
        return list(self._pool.map(work, self.targets))


def shown_as(target: Target) -> str:
    """How a target's messages name it: `orders (team=payments, env=prod) redis://host:6379/0`."""
    labels = target.label_text()
    return f"{target.name}{f' ({labels})' if labels else ''} {target.redis}"[:300]


def _refusal(refused: Mapping[str, str], name: str) -> Callable[[], str]:
    """Read at each check."""
    return lambda: refused.get(name, "")
