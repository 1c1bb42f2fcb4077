"""What lockguard says in `LOCKGUARD_SLACK_CHANNEL` on its own: scheduled and webhook findings,
digests, and the messages of cases a replica finished after a crash.

A scan that opened no case and flagged the same locks as the findings last posted posts nothing
within `REPEAT_AFTER_MS`, else a lock held for days would be posted every 15 minutes. The
fingerprint is `{lockguard}:posted:findings`, shared by every replica; a healthy scan forgets it.
"""

from __future__ import annotations

import hashlib
import logging
from contextlib import suppress

from bot.cases.approval import ApprovalReport
from bot.cases.case import Case
from bot.core import logs
from bot.core.errors import LockguardError
from bot.engine import Engine
from bot.scan.result import ScanResult
from bot.slack.alerts import Notifier
from bot.slack.blocks.kit import Message
from bot.slack.case_posts import CasePosts
from bot.slack.chat import Chat, SendError
from bot.store.message_refs import MessageRef
from bot.store.redis_errors import RedisError
from bot.store.slack_marks import FindingsMark

#: The same findings (no new case) are posted again at most this often.
REPEAT_AFTER_MS = 86_400_000
_log = logs.logger("slack.announcer")


def fingerprint(result: ScanResult) -> bytes:
    """Every flagged key with its reason, not only those kept: which are kept changes from scan
    to scan, and the same findings would be posted on every tick."""
    text = f"{result.findings}\n{result.flagged_digest:016x}"
    return hashlib.sha256(text.encode()).hexdigest()[:32].encode()


class Announcer:
    def __init__(
        self, engine: Engine, posts: CasePosts, chat: Chat, notifier: Notifier, channel: str
    ) -> None:
        self._engine = engine
        self._posts = posts
        self._chat = chat
        self._notifier = notifier
        self.channel = channel
        self._mark = FindingsMark(engine.door, REPEAT_AFTER_MS)

    def findings(self, trigger: str, result: ScanResult, case: Case | None) -> MessageRef | None:
        if not result.findings:
            self._forget_quietly(None)  # the same findings coming back are news again
            return None
        fp = fingerprint(result)
        news = self._news(fp)  # recorded whether or not a case makes it news anyway
        if case is None and not news:
            logs.event(_log, "findings_not_repeated", trigger=trigger, findings=result.findings)
            return None
        try:
            ref = self._posts.post_scan(self.channel, result, case)
        except SendError as exc:
            self._forget_quietly(fp)
            logs.event(
                _log,
                "findings_not_posted",
                logging.ERROR,
                trigger=trigger,
                channel=self.channel,
                error=exc.code,
                queued=exc.queued,
                case_id=case.id if case else None,
            )
            return None
        except LockguardError as exc:  # posted; where it is could not be saved
            logs.event(
                _log,
                "findings_message_not_saved",
                logging.WARNING,
                trigger=trigger,
                error=str(exc)[:200],
            )
            return None
        logs.event(
            _log,
            "findings_posted",
            trigger=trigger,
            channel=ref.channel,
            findings=result.findings,
            case_id=case.id if case else None,
        )
        return ref

    def _news(self, fp: bytes) -> bool:
        """Record `fp` as the findings last posted; True when it was not already."""
        try:
            return self._mark.news(fp)
        except RedisError:
            return True  # better said twice than not at all

    def _forget_quietly(self, fp: bytes | None) -> None:
        """Forget the findings last posted (only if they are `fp`, when given)."""
        with suppress(RedisError):
            self._mark.forget(fp)

    def digest(self, message: Message) -> MessageRef:
        return self._chat.post(self.channel, message)

    def resumed(self, report: ApprovalReport) -> bool:
        """Rewrite the case's message now that its release is finished; True when it was."""
        case = report.case
        try:
            updated = self._posts.refresh(case.id)
        except LockguardError as exc:
            self._notifier.error_seen(exc)
            updated = False
        if report.errors:
            self._notifier.release_failed(case, report)
        logs.event(_log, "resumed_case_shown", case_id=case.id, updated=updated)
        return updated
