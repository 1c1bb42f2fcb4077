"""The Home tab's listener: `app_home_opened` -> `views.publish`, built on the worker pool.

Only viewers see lockguard's locks and cases; anyone else's tab says who may and where to ask,
and nothing is read. With Redis failing, the tab says so instead of the inventory.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from slack_bolt import Ack, App, BoltContext

from bot.core import logs
from bot.core.errors import LockguardError
from bot.engine import Engine
from bot.slack.alerts import Notifier
from bot.slack.approvers import Viewers
from bot.slack.blocks.guard import Guard, GuardHealth
from bot.slack.blocks.home import fleet_home_view, home_view
from bot.slack.blocks.kit import header, section
from bot.slack.blocks.text import code, plain
from bot.slack.chat import Chat
from bot.slack.commands import CommandTargets
from bot.slack.work import Work

EVENT = "app_home_opened"
#: Cases the Home tab looks at (the open ones among them are listed).
CASES = 200
_log = logs.logger("slack.home")


class HomeTab:
    def __init__(
        self,
        engine: Engine,
        guard: Guard | None,
        chat: Chat,
        notifier: Notifier,
        work: Work,
        targets: CommandTargets | None = None,
        viewers: Viewers | None = None,
    ) -> None:
        self._targets = targets
        self._viewers = viewers
        self._engine = engine
        self._guard = guard
        self._chat = chat
        self._notifier = notifier
        self._work = work

    def register(self, app: App) -> None:
        app.event(EVENT)(self.on_opened)

    def on_opened(
        self, ack: Ack, event: dict[str, Any], body: dict[str, Any], context: BoltContext
    ) -> None:
        ack()
        user = str(event.get("user") or "")[:40]
        if not user or event.get("tab", "home") != "home":
            return
        team = str(body.get("team_id") or "")[:40]
        result = context.authorize_result
        our_team = result.team_id if result is not None else None
        self._work.submit("home tab", lambda: self.publish(user, team, our_team))

    def publish(self, user: str, team: str = "", our_team: str | None = None) -> bool:
        if self._viewers is not None:
            verdict = self._viewers.check(user, team, our_team)
            if not verdict.allowed:
                logs.event(_log, "home_tab_refused", logging.INFO, user=user)
                view = {"type": "home", "blocks": [header("lockguard"), section(verdict.refusal)]}
                return self._chat.publish_home(user, view)
        return self._chat.publish_home(user, self.view())

    def view(self) -> dict[str, Any]:
        homes = self._targets.homes if self._targets is not None else None
        if homes is not None:
            return fleet_home_view(homes(), now_ms=int(time.time() * 1000))
        try:
            status = self._engine.status()
            cases = self._engine.cases(CASES)
        except LockguardError as exc:
            self._notifier.error_seen(exc)
            logs.event(_log, "home_tab_unavailable", logging.WARNING, error=str(exc)[:200])
            return {
                "type": "home",
                "blocks": [
                    header(f"lockguard on {self._engine.endpoint}"),
                    section(
                        f"Redis {code(self._engine.endpoint)} did not answer, so nothing is "
                        f"known about its locks right now: {plain(str(exc), 2000)}"
                    ),
                ],
            }
        health = self._guard.snapshot().health if self._guard is not None else GuardHealth()
        return home_view(
            status.last_scan,
            cases,
            health,
            endpoint=self._engine.endpoint,
            now_ms=status.server_time_ms,
        )
