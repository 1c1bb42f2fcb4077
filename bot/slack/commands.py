"""`/lockguard`: scan [pattern], status, cases, help; anything else gets the help.

Every answer starts with the `ack()`; `status` and `cases` answer ephemerally through the
`response_url`, errors as their own message, never a traceback. A slash scan is least privilege:
only in `LOCKGUARD_SLACK_CHANNEL`, by `LOCKGUARD_SCANNERS`, its pattern only narrowing the
configured ones, one at a time and so many a minute. A command from another workspace is refused
before anything is read; `status` and `cases` answer only viewers; a fleet's target names are
told only to scanners.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from slack_bolt import Ack, App, BoltContext, Respond
from slack_sdk.errors import SlackClientError

from bot.core import logs
from bot.core.errors import ConfigError, LockguardError
from bot.core.model import TARGET_NAME
from bot.engine import Engine
from bot.slack.alerts import Notifier
from bot.slack.approvers import OTHER_TEAM, Person, Scanners, Viewers, same_team
from bot.slack.blocks import ids
from bot.slack.blocks.guard import Guard
from bot.slack.blocks.home import TargetHome
from bot.slack.blocks.kit import Message
from bot.slack.blocks.status import (
    TargetCases,
    TargetLine,
    cases_message,
    fleet_cases_message,
    help_message,
    status_message,
    targets_blocks,
)
from bot.slack.blocks.text import code, redis_text, refusal_text
from bot.slack.case_posts import CasePosts
from bot.slack.chat import SendError
from bot.slack.reposter import about_one_channel
from bot.slack.scan_gate import ScanGate
from bot.slack.work import Work

#: Flagged locks a Slack scan lists (the message shows the worst, its thread the rest).
LISTED = 200
#: Recent cases each target of a fleet is asked for by `/lockguard cases`.
CASES = 50
#: Targets asked at once for `/lockguard cases` (a dead one holds one thread, for its timeout).
THREADS = 8
#: `scan WORD` naming no target, when the right to scan needs a user-group look-up.
NO_TARGET = "No target by that name: `/lockguard scan TARGET [pattern]` names one of them."
_log = logs.logger("slack.commands")


def parse(text: str) -> tuple[str, str]:
    """("scan", "lock:billing:*"); Slack's entities turned back into what was typed."""
    typed = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").strip()
    word, _, rest = typed.partition(" ")
    return word.lower(), rest.strip()


class CommandTargets:
    """A fleet's targets, by name: the commands of each; empty without a fleet."""

    def __init__(self) -> None:
        self.by_name: dict[str, Commands] = {}
        self.lines: Callable[[], Sequence[TargetLine]] | None = None
        self.homes: Callable[[], Sequence[TargetHome]] | None = None

    def route(self, home: Commands, rest: str) -> tuple[Commands, str, str]:
        """(whose scan, its pattern, a refusal or ""). A first word shaped like a target's name
        that names none is refused; anything else is a pattern for this target."""
        first, _, pattern = rest.partition(" ")
        if not self.by_name:
            return home, rest, ""
        if first in self.by_name:
            return self.by_name[first], pattern.strip(), ""
        if TARGET_NAME.fullmatch(first):  # meant as a target's name: patterns have `*`, `:`...
            names = ", ".join(code(n) for n in list(self.by_name)[:50])
            said = f"No target {redis_text(first, 40)}. Type `/lockguard scan TARGET [pattern]`, "
            return home, "", f"{said}TARGET one of: {names}."
        return home, rest, ""

    def cases(self) -> list[TargetCases]:
        items = list(self.by_name.items())
        with ThreadPoolExecutor(
            max(1, min(THREADS, len(items))), thread_name_prefix="lockguard-slash-targets"
        ) as pool:
            return list(pool.map(lambda item: _target_cases(*item), items))

    def with_targets(self, message: Message) -> Message:
        if self.lines is None:
            return message
        blocks: list[dict[str, Any]] = [*message.get("blocks", []), *targets_blocks(self.lines())]
        return {**message, "blocks": blocks}


class Commands:
    def __init__(
        self,
        engine: Engine,
        posts: CasePosts,
        notifier: Notifier,
        work: Work,
        guard: Guard | None = None,
        *,
        channel: str = "",
        scanners: Scanners | None = None,
        gate: ScanGate | None = None,
        viewers: Viewers | None = None,
    ) -> None:
        self._engine = engine
        self._posts = posts
        self._notifier = notifier
        self._work = work
        self._guard = guard
        self._channel = channel
        self._scanners = scanners
        self._viewers = viewers
        self._gate = gate if gate is not None else ScanGate()
        self.targets = CommandTargets()

    def register(self, app: App) -> None:
        app.command(ids.COMMAND)(self.on_command)

    def on_command(
        self, ack: Ack, command: dict[str, Any], respond: Respond, context: BoltContext
    ) -> None:
        word, rest = parse(str(command.get("text") or ""))
        result = context.authorize_result
        asker = Person(
            str(command.get("user_id") or "")[:40],
            str(command.get("team_id") or "")[:40],
            result.team_id if result is not None else None,
            str(command.get("channel_id") or "")[:40],
        )
        enterprise = str(command.get("enterprise_id") or "")[:40]
        ours = (result.enterprise_id if result is not None else None) or ""
        if not same_team(asker.team, asker.our_team, enterprise, ours):
            logs.event(_log, "slash_other_team_refused", logging.WARNING, user=asker.user)
            ack(text=OTHER_TEAM)  # before anything is read or named
            return
        if word == "scan":
            commands, pattern, refusal = self.targets.route(self, rest)
            if refusal:
                ack(text=self._unknown_target(asker, refusal))
                return
            commands._start_scan(ack, asker, pattern, respond)
        elif word == "status":
            ack()
            self._work.submit("slash status", lambda: self._viewed(asker, respond, self._status))
        elif word == "cases":
            ack()
            self._work.submit("slash cases", lambda: self._viewed(asker, respond, self._cases))
        else:
            ack(**help_message())

    def _unknown_target(self, asker: Person, refusal: str) -> str:
        """The targets' names only to a scanner."""
        if self._scanners is None:
            return refusal
        quick = self._scanners.quick_check(asker.user, asker.team, asker.our_team)
        if quick is not None and quick.allowed:
            return refusal
        _refused(asker)
        return quick.refusal if quick is not None else NO_TARGET

    def _viewed(self, asker: Person, respond: Respond, answer: Callable[[Respond], None]) -> None:
        """`answer` for a viewer; the others are told where to ask, and nothing is read."""
        if self._viewers is not None:
            verdict = self._viewers.check(asker.user, asker.team, asker.our_team)
            if not verdict.allowed:
                logs.event(_log, "slash_view_refused", logging.WARNING, user=asker.user)
                _reply(respond, text=verdict.refusal)
                return
        answer(respond)

    def _start_scan(self, ack: Ack, asker: Person, pattern: str, respond: Respond) -> None:
        """The checks that need no I/O, before the ack. Who asks is checked before the pattern:
        a refusal about the pattern names the configured patterns, told only to scanners."""
        quick = (
            self._scanners.quick_check(asker.user, asker.team, asker.our_team)
            if self._scanners is not None
            else None
        )
        if quick is not None and not quick.allowed:  # before the gate: uses none of its limits
            _refused(asker)
            ack(text=quick.refusal)
            return
        if self._channel and asker.channel != self._channel:
            ack(
                text=f"Scans post their findings and cases in <#{self._channel}> only: run "
                "`/lockguard scan` there."
            )
            return
        checked = quick is not None or self._scanners is None  # else: after the group look-up
        if pattern and checked:
            refusal = self._pattern_refusal(pattern)
            if refusal:
                ack(text=refusal)
                return
        busy = self._gate.enter(asker.user, pattern[:200])
        if busy is not None:
            ack(text=busy)
            return
        what = redis_text(pattern, 200) if pattern else "the configured patterns"
        ack(text=f"Scanning {what}…")
        self._work.submit(
            "slash scan", lambda: self._gated_scan(asker, pattern or None, respond, checked)
        )

    def _gated_scan(
        self, asker: Person, pattern: str | None, respond: Respond, checked: bool
    ) -> None:
        """The scan once allowed. The gate is left exactly once: when the scan itself ends
        (before posting), or when it does not start."""
        started = False
        try:
            if self._scanners is not None:
                verdict = self._scanners.check(asker.user, asker.team, asker.our_team)
                if not verdict.allowed:
                    _refused(asker)
                    _reply(respond, text=verdict.refusal)
                    return
            refusal = self._pattern_refusal(pattern) if pattern and not checked else ""
            if refusal:
                _reply(respond, text=refusal)
                return
            started = True
            self._scan(self._channel or asker.channel, pattern, respond, asker.user)
        finally:
            if not started:
                self._gate.leave(refund=True)

    def post_in(self, channel: str) -> None:
        """A fleet's first target: its scans are typed and posted in its own `channel`."""
        self._channel = channel

    def _pattern_refusal(self, pattern: str) -> str:
        try:
            self._engine.narrow(pattern)
        except ConfigError as exc:
            return refusal_text(str(exc))
        return ""

    def _scan(self, channel: str, pattern: str | None, respond: Respond, user: str) -> None:
        try:
            try:
                result, case = self._engine.scan("slash", pattern=pattern, keep=LISTED, by=user)
            finally:
                self._gate.leave()
        except LockguardError as exc:
            self._notifier.scan_failed("slash", exc)
            if self._guard is not None:
                self._guard.scan_failed("slash")
            _reply(respond, text=refusal_text(str(exc)))
            return
        self._notifier.scan_ok("slash")
        if self._guard is not None:
            self._guard.scan_done("slash", result)
        try:
            self._posts.post_scan(channel, result, case)
        except SendError as exc:
            _reply(respond, text=unposted_text(exc, case.id if case else None))
        except LockguardError as exc:  # posted, but where it is could not be saved
            _reply(respond, text=refusal_text(str(exc)))

    def _status(self, respond: Respond) -> None:
        try:
            status = self._engine.status()
            cases = self._engine.cases(50)
        except LockguardError as exc:
            self._notifier.error_seen(exc)
            _reply(respond, text=refusal_text(str(exc)))
            return
        guard = self._guard.snapshot() if self._guard is not None else None
        message = status_message(status, cases, now_ms=status.server_time_ms, guard=guard)
        _reply(respond, **self.targets.with_targets(message))

    def _cases(self, respond: Respond) -> None:
        if self.targets.by_name:
            _reply(respond, **fleet_cases_message(self.targets.cases()))
            return
        try:
            now = self._engine.now_ms()
            cases = self._engine.cases(20)
        except LockguardError as exc:
            self._notifier.error_seen(exc)
            _reply(respond, text=refusal_text(str(exc)))
            return
        _reply(respond, **cases_message(cases, now_ms=now))


def _refused(asker: Person) -> None:
    logs.event(_log, "slash_scan_refused", logging.WARNING, user=asker.user, channel=asker.channel)


def _target_cases(name: str, commands: Commands) -> TargetCases:
    engine = commands._engine
    try:
        return TargetCases(name, engine.cases(CASES), engine.now_ms())
    except LockguardError as exc:
        commands._notifier.error_seen(exc)
        return TargetCases(name, (), 0, problem=str(exc))


def sibling(
    home: Commands, engine: Engine, posts: CasePosts, notifier: Notifier, guard: Guard, channel: str
) -> Commands:
    """Another target's commands, sharing `home`'s gate: one slash scan at a time in a fleet."""
    return Commands(
        engine,
        posts,
        notifier,
        home._work,
        guard,
        channel=channel,
        scanners=home._scanners,
        gate=home._gate,
        viewers=home._viewers,
    )


def unposted_text(exc: SendError, case_id: str | None) -> str:
    said = f"The scan ran, but Slack did not take its findings message (Slack: {code(exc.code)})"
    channel_trouble = about_one_channel(exc.code)
    if case_id is not None and exc.queued:
        when = (
            "once the app is in this channel (`/invite` it)"
            if channel_trouble
            else "as soon as Slack takes messages again"
        )
        return (
            f"{said}. Case {code(case_id)} waits in Redis, pending: its message, with the "
            f"Approve and Reject buttons, is posted here {when}. `lockguard cases` lists "
            "it meanwhile."
        )
    opened = f" Case {code(case_id)} waits in Redis: `lockguard cases`." if case_id else ""
    advice = (
        "invite the app to the channel and scan again"
        if channel_trouble
        else "scan again in a while"
    )
    return f"{said}; {advice}.{opened}"


def _reply(respond: Respond, *, text: str, blocks: list[dict[str, Any]] | None = None) -> None:
    try:
        respond(text=text, blocks=blocks, response_type="ephemeral", replace_original=False)
    except (SlackClientError, OSError, ValueError) as exc:  # no response_url; Slack away
        logs.event(_log, "slash_reply_failed", logging.WARNING, error=type(exc).__name__)
