"""Where one Redis's always-on side speaks in Slack: its `Notifier` (alerts, the one outage
message, recoveries) and its `Announcer` (findings, digests, resumed cases). The Slack app's own
engine speaks with the app's; a fleet's other targets (`separate`) each get their own, kept in
their own Redis, in their own channel (the target's `channel`, else `LOCKGUARD_SLACK_CHANNEL`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bot.config import Settings
from bot.core import logs
from bot.core.errors import LockguardError
from bot.engine import Engine
from bot.slack.alerts import Notifier
from bot.slack.announcer import Announcer
from bot.slack.app import SlackApp
from bot.slack.blocks.guard import Guard
from bot.slack.case_posts import CasePosts
from bot.slack.chat import SendError
from bot.slack.commands import sibling
from bot.slack.decider import Decider
from bot.store.message_refs import MessageStore

_log = logs.logger("operations")


class Voice:
    """Empty until `attach(...)`; the jobs that speak before it raise RuntimeError."""

    def __init__(self) -> None:
        self._notifier: Notifier | None = None
        self._announcer: Announcer | None = None

    def attach(
        self,
        engine: Engine,
        settings: Settings,
        slack: SlackApp,
        *,
        separate: bool = False,
        routed: tuple[str, Callable[[], bool]] | None = None,
        shown_as: str | None = None,
        guard: Guard | None = None,
    ) -> None:
        """`routed`: (the target's name, whether its Redis is up): its cases' clicks are decided
        on its Redis and `/lockguard scan NAME` scans it. `shown_as`: how its messages name it."""
        notifier, posts = slack.notifier, slack.posts
        channel = settings.slack_channel or slack.notifier.channel
        if separate:
            notifier = Notifier(engine, slack.chat, channel)
            posts = CasePosts(
                engine,
                slack.chat,
                MessageStore(engine.door, engine.config.retention_ms),
                approvers_note=slack.approvers.note(),
                typed_above=settings.confirm_typed_above,
                shown_as=shown_as,
            )
            slack.reposter.add(posts)  # its case messages Slack did not take, posted later
        if shown_as is not None:  # the app's own posts too, when it is a fleet's first target
            posts.shown_as = shown_as
        self._notifier = notifier
        self._announcer = Announcer(engine, posts, slack.chat, notifier, channel)
        if routed is not None:
            posts.target = routed[0]  # its buttons say where the case is kept
        if routed is not None and guard is not None:
            decider, commands = slack.router.home, slack.commands
            if separate:
                decider = Decider(engine, posts, slack.approvers, notifier, slack.chat)
                commands = sibling(commands, engine, posts, notifier, guard, channel)
            else:  # the fleet's first target: the app's own commands scan it, in its channel
                commands.post_in(channel)
            slack.router.add(routed[0], decider, routed[1])
            slack.commands.targets.by_name[routed[0]] = commands

    @property
    def attached(self) -> bool:
        return self._notifier is not None

    @property
    def notifier(self) -> Notifier:
        if self._notifier is None:
            raise RuntimeError("Operations.attach(slack) was not called")
        return self._notifier

    @property
    def speaker(self) -> Announcer:
        if self._announcer is None:
            raise RuntimeError("Operations.attach(slack) was not called")
        return self._announcer

    def alert(self, kind: str, title: str, detail: str) -> None:
        """The silence alarm's alert; raises when Slack did not take it (the next check retries)."""
        notifier = self.notifier
        if not notifier.raise_alert(kind, title, detail) and not notifier.is_out(kind):
            raise SendError("chat.postMessage", "alert_not_posted")

    def recovered(self, kind: str, title: str) -> None:
        self.notifier.resolve(kind, title)

    def job_failed(self, job: str, exc: BaseException) -> None:
        """Logged, and a failed digest alerted."""
        logs.event(_log, f"{job}_failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}"[:300])
        self.notifier.error_seen(exc)
        if job == "digest":
            self.notifier.raise_alert("digest", "the digest was not posted", _digest_failure(exc))


def _digest_failure(exc: BaseException) -> str:
    """For the digest's alert: never a traceback nor a secret."""
    if isinstance(exc, LockguardError):
        return str(exc)
    if isinstance(exc, SendError):
        return f"Slack did not take it ({exc.code})"
    return f"an internal error ({type(exc).__name__}); see lockguard's logs"
