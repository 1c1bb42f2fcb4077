"""Alerts in `LOCKGUARD_SLACK_CHANNEL`: lockguard says so when it cannot do its job. The text is
the error's own message: never a secret, never a traceback.

An alert still true is not posted again: its fingerprint (kind and words) is kept in memory and,
when Redis answers, in `{lockguard}:alerts`, so a restart or another replica stays quiet too; a
success clears it. Problems share the outage's one message (`bot.slack.outage`); a silence
watch (the user's own job) and a release failure get messages of their own.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from contextlib import suppress

from bot.cases.approval import ApprovalReport
from bot.cases.case import Case
from bot.core import logs
from bot.core.errors import LockguardError, RedisUnavailableError
from bot.engine import Engine
from bot.release import Outcome
from bot.slack.blocks.kit import Message
from bot.slack.blocks.outage_message import alert_message
from bot.slack.blocks.text import count
from bot.slack.chat import Chat
from bot.slack.outage import Outage, send_alert
from bot.store.redis_errors import RedisError
from bot.store.slack_marks import AlertMarks

REDIS = "redis"
#: Kinds with an alert and a recovery of their own, outside the outage's message.
STANDALONE = "silence:watch:"
_log = logs.logger("slack.alerts")


def _fingerprint(title: str, detail: str) -> str:
    return hashlib.sha256(f"{title}\n{detail}".encode()).hexdigest()[:16]


class Notifier:
    def __init__(self, engine: Engine, chat: Chat, channel: str) -> None:
        self._engine = engine
        self._marks = AlertMarks(engine.door)
        self._chat = chat
        self.channel = channel
        self._posted: dict[str, str] = {}  # kind -> fingerprint
        self._outage = Outage(chat, channel, self._marks, engine.endpoint)
        self._lock = threading.Lock()

    def scan_failed(self, trigger: str, error: BaseException) -> None:
        """Redis trouble is always alerted; any other error only when no person typed the scan
        (they got the error as a reply)."""
        if isinstance(error, RedisUnavailableError):
            self.redis_unavailable(error)
        elif trigger != "slash":
            detail = (
                str(error)
                if isinstance(error, LockguardError)
                else f"an internal error ({type(error).__name__}); see lockguard's logs"
            )
            self.raise_alert(f"scan:{trigger}", f"the {trigger} scan failed", detail)

    def error_seen(self, error: BaseException) -> None:
        """A person ran into `error` (they are told): alerted only when it is Redis trouble."""
        if isinstance(error, RedisUnavailableError):
            self.redis_unavailable(error)

    def scan_ok(self, trigger: str) -> None:
        self.resolve(REDIS, "Redis answers again")
        self.resolve(f"scan:{trigger}", f"the {trigger} scan works again")

    def redis_unavailable(self, error: LockguardError) -> None:
        self.raise_alert(REDIS, "Redis unreachable or refusing lockguard", str(error))

    def release_failed(self, case: Case, report: ApprovalReport) -> None:
        errors = [o for o in report.outcomes if o.outcome == Outcome.ERROR.value]
        first = f" First: {errors[0].detail}" if errors else ""
        detail = (
            f"Case {case.id}: {count(report.errors, 'lock')} of "
            f"{count(report.total, 'lock')} ended in error after the approval by "
            f"{case.decided_by or 'someone'} (the release or its verification failed); "
            f"the case is {case.state.value}.{first} "
            f"`lockguard approve {case.id} --by NAME --resume` retries them."
        )
        self._post(
            alert_message("a release was not verified", detail, endpoint=self._engine.endpoint)
        )

    def raise_alert(self, kind: str, title: str, detail: str) -> bool:
        """Show the alert unless the same one is out already; True when it was shown."""
        fp = _fingerprint(title, detail)
        with self._lock:
            if self._posted.get(kind) == fp:
                return False
            if kind != REDIS and self._stored(kind) == fp:
                self._posted[kind] = fp
                return False
            if kind.startswith(STANDALONE):
                shown = self._post(alert_message(title, detail, endpoint=self._engine.endpoint))
            else:
                shown = self._outage.add(kind, title, detail)
            if not shown:
                return False  # not out: the next failure tries again
            self._posted[kind] = fp
            if kind != REDIS:
                self._store(kind, fp)
            return True

    def is_out(self, kind: str) -> bool:
        with self._lock:
            if kind in self._posted:
                return True
        return kind != REDIS and self._stored(kind) is not None

    def resolve(self, kind: str, words: str) -> bool:
        """Clear the alert `kind`; when one was out (True), say it is resolved."""
        with self._lock:
            was_out = self._posted.pop(kind, None) is not None
            with suppress(RedisError):
                was_out = self._marks.clear(kind) or was_out
            if not was_out:
                return False
            if kind.startswith(STANDALONE):
                self._post(
                    alert_message("resolved", f"{words}.", endpoint=self._engine.endpoint)
                    | {"text": f"lockguard: resolved: {words} ({self._engine.endpoint})"}
                )
            else:
                self._outage.clear(kind, words)
        logs.event(_log, "alert_resolved", kind=kind)
        return True

    def _stored(self, kind: str) -> str | None:
        try:
            return self._marks.get(kind)
        except RedisError:
            return None

    def _store(self, kind: str, fp: str) -> None:
        with suppress(RedisError):
            self._marks.set(kind, fp)

    def _post(self, message: Message) -> bool:
        if send_alert(self._chat, self.channel, message) is None:
            return False
        logs.event(
            _log, "alert_posted", logging.WARNING, channel=self.channel, text=message["text"]
        )
        return True
