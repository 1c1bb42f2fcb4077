"""`lockguard serve`: the Slack app on HTTP or Socket Mode, and the always-on side, until SIGTERM
or SIGINT.

`start` goes in an order where a bad configuration touches nothing: every missing or malformed
setting, by name (exit 2), before any connection; the Bolt app (a token `auth.test` refuses is
exit 2); Socket Mode when SLACK_APP_TOKEN is set, and the HTTP server (`POST /slack/events` in
HTTP mode only); the always-on side of every target (`bot.serve.fleet_operations`); last, one
line on stderr, never a secret. `Served.stop()` undoes it: the schedules first (running jobs
finish, the leases are given back), the checks, Socket Mode, HTTP, then the Slack app's workers
(a release already running finishes first).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from types import FrameType
from typing import TextIO

from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk import WebClient

from bot.compose import build_engine
from bot.config import Settings
from bot.core import logs
from bot.core.errors import ConfigError, LockguardError
from bot.engine import Engine
from bot.fleet import Target
from bot.fleet.results import alone
from bot.fleet.targets_file import load_fleet
from bot.ops.bolt_route import SLACK_EVENTS_PATH, bolt_route
from bot.ops.health import live_route
from bot.ops.http_server import HttpServer, Route
from bot.serve.fleet_operations import FleetOperations
from bot.serve.operations import Tuning
from bot.slack.app import SlackApp, build_slack_app
from bot.slack.chat import error_code, slack_errors
from bot.slack.reposter import EVERY as REPOST_EVERY

EXIT_OK = 0


@dataclass
class Served:
    """What `start` started. `stop()` is safe to call twice."""

    slack: SlackApp
    http: HttpServer
    ops: FleetOperations
    socket: SocketModeHandler | None = None

    @property
    def mode(self) -> str:
        return "socket" if self.socket is not None else "http"

    @property
    def port(self) -> int:
        return self.http.port

    @property
    def url(self) -> str:
        return self.http.url

    def stop(self) -> None:
        self.ops.stop()
        if self.socket is not None:
            self.socket.close()  # type: ignore[no-untyped-call]
            self.socket = None
        self.http.stop()
        self.slack.close()
        for part in self.ops.parts.values():  # nothing uses them now: their sockets are closed
            part.engine.client.close()


def routes(slack: SlackApp, ops: FleetOperations, *, socket_mode: bool) -> list[Route]:
    """Slack's `POST /slack/events` only in HTTP mode."""
    slack_events = [] if socket_mode else [bolt_route(slack.app)]
    return [*ops.routes(), live_route(), *slack_events]


def start(
    settings: Settings,
    *,
    engine: Engine | None = None,
    client: WebClient | None = None,
    port: int | None = None,
    err: TextIO | None = None,
    repost_every: float = REPOST_EVERY,
    tuning: Tuning | None = None,
    targets: Sequence[Target] | None = None,
) -> Served:
    """`targets` default to `load_fleet(settings)`, `engine` (the first target's) to one built
    from its settings; tests shorten `repost_every` and `tuning`."""
    fleet = list(targets) if targets is not None else load_fleet(settings)
    problems = settings.serve_problems() + _target_problems(fleet)
    if problems:
        raise ConfigError("\n".join(problems))
    ops = _operations(settings, fleet, engine, tuning)
    engine = ops.home.engine
    slack = build_slack_app(
        engine, settings, client=client, repost_every=repost_every, guard=ops.home
    )
    ops.attach(slack)
    app_token = settings.slack_app_token.get_secret_value() if settings.slack_app_token else ""
    served = Served(
        slack,
        HttpServer(
            settings.http_host,
            settings.port if port is None else port,
            routes(slack, ops, socket_mode=bool(app_token)),
        ),
        ops,
    )
    try:
        if app_token:
            served.socket = _socket_mode(slack, app_token)
        served.http.start()
        ops.start()
    except OSError as exc:
        served.stop()
        where = f"{settings.http_host}:{settings.port if port is None else port}"
        raise ConfigError(
            f"PORT: cannot listen on {where} ({exc.strerror or type(exc).__name__})"
        ) from None
    except BaseException:
        served.stop()
        raise
    print(
        f"lockguard serve: {_mode_words(served)} on {settings.http_host}:{served.port}, "
        f"channel {settings.slack_channel}, Redis {_redis_words(fleet, engine)}, dry run "
        f"{'on' if engine.config.dry_run else 'off'}, approvals needed "
        f"{engine.config.required_approvals}, scans {settings.scan_schedule_spec.describe()}, "
        f"digests {settings.digest_schedule_spec.describe()}, webhook "
        f"{'on' if settings.webhook_key else 'off'}",
        file=err or sys.stderr,
        flush=True,
    )
    return served


def _socket_mode(slack: SlackApp, app_token: str) -> SocketModeHandler:
    handler = SocketModeHandler(slack.app, app_token, logger=logs.logger("slack.socket"))
    try:
        handler.connect()  # type: ignore[no-untyped-call]
    except slack_errors() as exc:
        handler.close()  # type: ignore[no-untyped-call]
        raise ConfigError(
            f"SLACK_APP_TOKEN: Slack refused the Socket Mode connection "
            f"(apps.connections.open: {error_code(exc)})"
        ) from None
    return handler


def _operations(
    settings: Settings, fleet: Sequence[Target], engine: Engine | None, tuning: Tuning | None
) -> FleetOperations:
    first = engine if engine is not None else build_engine(fleet[0].settings)
    engines = {fleet[0].name: first} | {t.name: build_engine(t.settings) for t in fleet[1:]}
    return FleetOperations(fleet, engines, settings, tuning)


def _redis_words(fleet: Sequence[Target], engine: Engine) -> str:
    if alone(fleet):
        return engine.endpoint
    return f"fleet of {len(fleet)} targets ({', '.join(t.name for t in fleet)[:300]})"


def _mode_words(served: Served) -> str:
    if served.socket is not None:
        return "Socket Mode (HTTP for the other endpoints)"
    return f"HTTP mode (POST {SLACK_EVENTS_PATH})"


def _target_problems(fleet: Sequence[Target]) -> list[str]:
    """A fleet's target whose own password is too short to mask, as `serve_problems` says of
    REDIS_PASSWORD; never the password."""
    return [
        f"target {t.name}: {line}"
        for t in ([] if alone(fleet) else fleet)
        for line in t.settings.serve_problems()
        if line.startswith(("REDIS_PASSWORD:", "REDIS_URL:"))
    ]


def run(
    settings: Settings, *, err: TextIO | None = None, targets: Sequence[Target] | None = None
) -> int:
    """Serve until SIGTERM or SIGINT, then stop cleanly. The handlers are in place before
    anything starts: a signal while `start` runs stops serve as soon as it is up."""
    err = err or sys.stderr
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            served = start(settings, err=err, targets=targets)
        except LockguardError as exc:
            for line in str(exc).splitlines():
                print(f"lockguard: error: {line}", file=err)
            return exc.exit_code
        try:
            while not stopping.wait(1.0):
                pass
        finally:
            print(
                "lockguard serve: stopping (jobs already running finish first)",
                file=err,
                flush=True,
            )
            served.stop()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return EXIT_OK
