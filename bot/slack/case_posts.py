"""The messages that show a scan and its case: posted once, then kept in step with Redis.

A pending case whose message Slack refused goes in the unposted queue; `repost` later posts the
case's own message. `refresh` rewrites a message from the case as Redis holds it now, never from
a copy Slack sent back. A case is approvable from Slack only once its thread shows every lock.
Refreshes and reposts of one case are serialised and read the case inside the lock, so a slow
early update (the first of two approvals) cannot land after a later one.
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Iterator
from typing import Any

from bot.cases.case import Case, CaseLock, State
from bot.core import logs
from bot.core.errors import LockguardError
from bot.engine import Engine
from bot.report.case_list import case_csv
from bot.scan.result import ScanResult
from bot.slack.blocks import kit
from bot.slack.blocks.case_message import case_message, case_post
from bot.slack.blocks.findings import (
    FindingsPost,
    attachment_name,
    findings_message,
    healthy_message,
    with_target,
)
from bot.slack.blocks.kit import BUDGET, Message, context
from bot.slack.blocks.text import code, count, date
from bot.slack.chat import Chat, SendError
from bot.store.message_refs import MessageRef, MessageStore
from bot.store.unposted import UnpostedQueue

_STRIPES = 64
_log = logs.logger("slack.cases")


def verification_text(case: Case) -> str | None:
    if case.dry_run or case.state not in (State.RELEASED, State.INCOMPLETE):
        return None
    errors = case.outcome_counts.get("error", 0)
    released = case.outcome_counts.get("released", 0)
    if errors:
        return (
            f"Not verified: {count(errors, 'lock')} ended in error (the release or its "
            "check afterwards failed); each is named below."
        )
    if released:
        return (
            f"Verified: each of the {count(released, 'released lock')} was read back "
            "after the release: gone, or taken by a new holder."
        )
    return "Nothing was released, so there was nothing to verify."


def case_options(
    engine: Engine, case: Case, typed_above: int | None, endpoint: str | None = None
) -> dict[str, Any]:
    """`case_message`'s keyword arguments besides the case."""
    return {
        "endpoint": endpoint or engine.endpoint,
        "dry_run": engine.config.dry_run,
        "approvals": list(case.approvals),
        "required_approvals": engine.config.required_approvals,
        "verification": verification_text(case),
        "typed_above": typed_above,
    }


def attach_comment(case: Case) -> str:
    return (
        f"Every lock of case {code(case.id)}: "
        f"{count(case.total_locks, 'lock')}. Approve releases exactly these, "
        "each only if the holder listed still holds it."
    )


def late_note(message: Message, queued_ms: int) -> Message:
    """`message` with a line saying it comes late, when that fits."""
    note = context(
        f"Posted late: Slack did not take this case's message at "
        f"{date(queued_ms)}; the case waited in Redis."
    )
    blocks = list(message.get("blocks") or [])
    with_note = [*blocks[:1], note, *blocks[1:]]
    if len(with_note) > kit.MESSAGE_BLOCKS or kit.blocks_size(with_note) > BUDGET:
        return message
    return {**message, "blocks": with_note}


def post_thread(chat: Chat, ref: MessageRef, replies: list[Message]) -> bool:
    """True when every reply was posted; the first Slack refuses ends the thread (logged)."""
    for n, reply in enumerate(replies, 1):
        try:
            chat.post(ref.channel, reply, thread_ts=ref.ts)
        except SendError as exc:
            logs.event(
                _log,
                "thread_reply_not_posted",
                logging.WARNING,
                channel=ref.channel,
                reply=n,
                of=len(replies),
                error=exc.code,
            )
            return False
    return True


def queue_unposted(unposted: UnpostedQueue, case_id: str, channel: str, code: str) -> bool:
    """False when Redis would not take it either (logged: the case still waits)."""
    try:
        unposted.add(case_id, channel)
    except (LockguardError, ValueError) as exc:
        logs.event(
            _log,
            "case_message_not_queued",
            logging.ERROR,
            case_id=case_id,
            channel=channel,
            error=str(exc)[:200],
        )
        return False
    logs.event(
        _log, "case_message_queued", logging.WARNING, case_id=case_id, channel=channel, error=code
    )
    return True


class CasePosts:
    def __init__(
        self,
        engine: Engine,
        chat: Chat,
        store: MessageStore,
        *,
        approvers_note: str,
        unposted: UnpostedQueue | None = None,
        typed_above: int | None = None,
        shown_as: str | None = None,
    ) -> None:
        self._engine = engine
        self.shown_as = shown_as or engine.endpoint
        #: The fleet's target these cases are kept in (its buttons name it).
        self.target: str | None = None
        self._typed_above = typed_above
        self._chat = chat
        self._store = store
        self._note = approvers_note
        self.unposted = unposted if unposted is not None else UnpostedQueue(engine.door)
        self._locks = [threading.Lock() for _ in range(_STRIPES)]

    def _lock(self, case_id: str) -> threading.Lock:
        return self._locks[zlib.crc32(case_id.encode()) % _STRIPES]

    def post_scan(self, channel: str, result: ScanResult, case: Case | None) -> MessageRef:
        if not result.findings:
            return self._chat.post(channel, healthy_message(result, endpoint=self.shown_as))
        post = self._findings(result, case)
        try:
            ref = self._chat.post(channel, post.message)
        except SendError as exc:
            if case is not None and case.state is State.PENDING:
                exc.queued = queue_unposted(self.unposted, case.id, channel, exc.code)
            raise
        if case is None or case.state is not State.PENDING:
            post_thread(self._chat, ref, post.replies)
            return ref
        self._store.save(case.id, ref, listed=not post.replies and not post.attach)
        if self._listed(case.id, ref, post):
            return ref
        self._chat.update(ref, self._findings(result, case, approvable=False).message)
        return ref

    def _listed(self, case_id: str, ref: MessageRef, post: FindingsPost) -> bool:
        """Post the thread of a pending case's message; True (marked listed) once it is all in."""
        if not post.replies and not post.attach:
            return True
        if post.attach:
            done = self._attach(case_id, ref)
        else:
            done = post_thread(self._chat, ref, post.replies)
        if done:
            self._store.mark_listed(case_id)
            return True
        logs.event(_log, "case_not_approvable_here", logging.WARNING, case_id=case_id)
        return False

    def _attach(self, case_id: str, ref: MessageRef) -> bool:
        """The case's whole list as a file in the thread; False (logged) when Redis or Slack
        failed, or the list is not the whole case."""
        try:
            case = self._engine.case(case_id)
            total = case.total_locks
            batches = self._engine.case_lock_batches(case_id)
            rows = [0]

            def each() -> Iterator[CaseLock]:
                for batch in batches:
                    rows[0] += len(batch)
                    yield from batch

            content = case_csv(each())
            if rows[0] != total:  # never attach part of a case as if it were all of it
                logs.event(
                    _log, "case_list_short", logging.ERROR, case_id=case_id, rows=rows[0], of=total
                )
                return False
            self._chat.upload(ref, attachment_name(case_id), content, attach_comment(case))
        except (SendError, LockguardError) as exc:
            logs.event(
                _log, "case_list_not_attached", logging.WARNING, case_id=case_id, error=str(exc)
            )
            return False
        return True

    def _findings(
        self, result: ScanResult, case: Case | None, *, approvable: bool = True
    ) -> FindingsPost:
        post = findings_message(
            result,
            case,
            endpoint=self.shown_as,
            dry_run=self._engine.config.dry_run,
            auto_remediate=self._engine.auto_remediate,
            approvers_note=self._note,
            typed_above=self._typed_above,
            approvable=approvable,
        )
        return with_target(post, self.target)

    def repost(self, case_id: str, channel: str, queued_ms: int) -> MessageRef | None:
        """Post the message of a case that never had one; None when it has one already or is
        no longer pending."""
        with self._lock(case_id):
            if self._store.get(case_id) is not None:
                return None
            now = self._engine.now_ms()
            case = self._engine.case(case_id)
            if case.effective_state(now) is not State.PENDING:
                return None
            options = case_options(self._engine, case, self._typed_above, self.shown_as)
            post = with_target(case_post(case, now_ms=now, **options), self.target)
            ref = self._chat.post(channel, late_note(post.message, queued_ms))
            self._store.save(case_id, ref, listed=not post.attach)
            if not self._listed(case_id, ref, post):
                unlisted = with_target(
                    case_post(case, now_ms=now, approvable=False, **options), self.target
                )
                self._chat.update(ref, late_note(unlisted.message, queued_ms))
            return ref

    def refresh(
        self,
        case_id: str,
        shown: MessageRef | None = None,
        *,
        progress: tuple[int, int] | None = None,
    ) -> bool:
        """Rewrite the case's message (the saved one, else `shown`) from Redis; `progress`
        (locks done, of) while its release runs. False when there is none or Slack refused."""
        with self._lock(case_id):
            ref = self._store.get(case_id) or shown
            if ref is None:
                logs.event(_log, "case_message_unknown", logging.WARNING, case_id=case_id)
                return False
            case = self._engine.case(case_id)
            message = case_message(
                case,
                now_ms=self._engine.now_ms(),
                progress=progress,
                **case_options(self._engine, case, self._typed_above, self.shown_as),
            )
            return self._chat.update(ref, with_target(FindingsPost(message), self.target).message)

    def where(self, case_id: str) -> MessageRef | None:
        return self._store.get(case_id)

    def listed(self, case_id: str) -> bool:
        return self._store.listed(case_id)

    def adopt(self, case_id: str, shown: MessageRef, *, relist: bool = False) -> bool:
        """`shown`, the message clicked on, becomes the case's when Redis has none (a modal's
        submission carries no message). As not listed: Approve is refused until, with `relist`,
        the whole list is in its thread. True when it adopted a pending case and its whole list
        is now in the thread."""
        with self._lock(case_id):
            if self._store.get(case_id) is not None:
                return False
            case = self._engine.case(case_id)  # a case of ours (the id came from the payload)
            self._store.save(case_id, shown, listed=False)
        pending = case.effective_state(self._engine.now_ms()) is State.PENDING
        listed = relist and pending and self._attach(case_id, shown)
        if listed:
            self._store.mark_listed(case_id)
        logs.event(
            _log,
            "case_message_adopted",
            logging.WARNING,
            case_id=case_id,
            channel=shown.channel,
            ts=shown.ts,
        )
        return listed
