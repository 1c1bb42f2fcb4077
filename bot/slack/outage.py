"""The outage's one message in `LOCKGUARD_SLACK_CHANNEL`: posted for its first problem, rewritten
in place as problems join and clear, and, when the last clears, rewritten as resolved with one
recovery message posted.

Where the message is and its problems are kept in memory and, when Redis answers, in
`{lockguard}:alerts`, so a restart or another replica rewrites the same message. The recovery is
posted once: by the caller that takes the message's coordinates out of Redis, or (when they
never got there) by the process that posted it.
"""

from __future__ import annotations

import logging
from contextlib import suppress

from bot.core import logs
from bot.slack.blocks.kit import Message
from bot.slack.blocks.outage_message import (
    Problem,
    outage_message,
    outage_over_message,
    recovery_message,
)
from bot.slack.chat import Chat, SendError
from bot.store.message_refs import MessageRef
from bot.store.redis_errors import RedisError
from bot.store.slack_marks import AlertMarks

_log = logs.logger("slack.alerts")


class Outage:
    """Not thread-safe: the Notifier calls it under its lock."""

    def __init__(self, chat: Chat, channel: str, marks: AlertMarks, endpoint: str) -> None:
        self._chat = chat
        self.channel = channel
        self._marks = marks
        self._endpoint = endpoint
        self._ref: MessageRef | None = None  # the message this process posted or updated
        self._ref_stored = False  # ...and it is in Redis
        self._problems: dict[str, Problem] = {}  # kind -> problem, as this process knows them
        self._unstored: set[str] = set()  # ...of which Redis could not hold these
        self._titles: dict[str, str] = {}  # every problem of this outage, cleared or not
        self._cleared: list[str] = []  # what cleared meanwhile, in words

    def add(self, kind: str, title: str, detail: str) -> bool:
        """`kind`'s problem joins the outage (or its detail changed); True when it is shown."""
        ref = self._where()
        self._problems[kind] = (title, detail)
        self._titles[kind] = title
        self._unstored.add(kind)
        with suppress(RedisError):
            self._marks.set_line(kind, title, detail)
            self._unstored.discard(kind)
        problems = self._all()
        shown = outage_message(problems, endpoint=self._endpoint, cleared=self._cleared)
        if ref is not None and self._chat.update(ref, shown):
            self._ref = ref
            if not self._ref_stored:  # posted while Redis was down: now any replica finds it
                with suppress(RedisError):
                    self._marks.set_outage(ref)
                    self._ref_stored = True
            logs.event(_log, "alert_updated", logging.WARNING, kind=kind, text=shown["text"])
            return True
        if self._post(shown, kind):
            return True
        self._problems.pop(kind, None)  # not out: the next failure tries again
        self._unstored.discard(kind)
        with suppress(RedisError):
            self._marks.clear_line(kind)
        return False

    def clear(self, kind: str, words: str) -> None:
        self._problems.pop(kind, None)
        self._unstored.discard(kind)
        with suppress(RedisError):
            self._marks.clear_line(kind)
        ref = self._where()
        self._cleared.append(words)
        problems = self._all()
        if problems:
            if ref is not None:
                self._chat.update(
                    ref, outage_message(problems, endpoint=self._endpoint, cleared=self._cleared)
                )
            return
        if self._announces():
            said = list(self._cleared)
            if ref is not None:
                titles = [(t, "") for t in self._titles.values()] or [(words, "")]
                self._chat.update(ref, outage_over_message(titles, said, endpoint=self._endpoint))
            self._send(recovery_message(said, endpoint=self._endpoint))
        self._reset()

    def _all(self) -> list[Problem]:
        """Redis's list when it answers (any replica's), with those Redis could not hold."""
        try:
            merged = {kind: (title, detail) for kind, title, detail in self._marks.lines()}
        except RedisError:
            return list(self._problems.values())
        for kind in self._unstored & set(self._problems):
            merged[kind] = self._problems[kind]
        return list(merged.values())

    def _where(self) -> MessageRef | None:
        """Redis's word when it answers (another replica may have posted or ended it)."""
        try:
            stored = self._marks.outage()
        except RedisError:
            return self._ref
        if stored is not None:
            self._ref, self._ref_stored = stored, True
        elif self._ref_stored:  # over: another replica said so
            self._reset()
        return self._ref

    def _reset(self) -> None:
        self._ref, self._ref_stored = None, False
        self._titles.clear()
        self._cleared.clear()

    def _announces(self) -> bool:
        """Whether this caller posts the recovery (see the module's docstring)."""
        try:
            if self._marks.take_outage():
                return True
        except RedisError:
            return self._ref is not None
        return self._ref is not None and not self._ref_stored

    def _post(self, message: Message, kind: str) -> bool:
        ref = self._send(message)
        if ref is None:
            return False
        self._ref, self._ref_stored = ref, False
        with suppress(RedisError):
            self._marks.set_outage(ref)
            self._ref_stored = True
        logs.event(_log, "alert_posted", logging.WARNING, kind=kind, text=message["text"])
        return True

    def _send(self, message: Message) -> MessageRef | None:
        return send_alert(self._chat, self.channel, message)


def send_alert(chat: Chat, channel: str, message: Message) -> MessageRef | None:
    try:
        return chat.post(channel, message)
    except SendError as exc:
        logs.event(
            _log,
            "alert_not_posted",
            logging.ERROR,
            channel=channel,
            error=exc.code,
            text=message["text"],
        )
        return None
