"""Approve and reject, after the ack: authorise the person, call the engine, show the result.

Run on lockguard's worker pool (`bot.slack.work`) by the listeners of `bot.slack.actions`.
Every click is authorised first (`Approvers`); a refused person is told so, only them, and
nothing else happens. Then one engine call, whose state change is atomic in Redis: of two
clicks at once, or a double click, one wins and the other is told who decided first. The case's
message is then rewritten from Redis (`CasePosts.refresh`).

A click on Approve of a pending case of more than `typed_above` locks
(`LOCKGUARD_CONFIRM_TYPED_ABOVE`) approves nothing: once the person is authorised, the modal
that asks for the number of locks is opened (`bot.slack.blocks.approve_modal`). Its submission, the
number checked (`count_problem`, before the ack), comes back here without `ask`, and the person
is authorised again: the same path as a click on a small case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.cases.case import State
from bot.core.errors import CaseDecidedError, CaseError, LockguardError, SameApproverError
from bot.engine import Engine
from bot.slack.alerts import Notifier
from bot.slack.approvers import Approvers
from bot.slack.blocks.approve_modal import approve_modal, count_problem, needs_typed_count
from bot.slack.blocks.guard import Guard
from bot.slack.blocks.messages import already_decided_text, refusal_text, same_approver_text
from bot.slack.case_posts import CasePosts
from bot.slack.chat import Chat
from bot.store.messages import MessageRef


@dataclass(frozen=True, slots=True)
class Clicker:
    """Who acted: their user and team ids, our team (from auth.test), and the channel to tell
    them in ("" when the action did not come from a message: the case's message channel)."""

    user: str
    team: str
    our_team: str | None
    channel: str = ""


#: Opens a modal (the approve modal's view) for the person who clicked.
Ask = Callable[[dict[str, Any]], None]


class Decisions:
    def __init__(
        self,
        engine: Engine,
        posts: CasePosts,
        approvers: Approvers,
        notifier: Notifier,
        chat: Chat,
        guard: Guard | None = None,
        *,
        typed_above: int | None = None,
    ) -> None:
        self._typed_above = typed_above
        self._guard = guard
        self._engine = engine
        self._posts = posts
        self._approvers = approvers
        self._notifier = notifier
        self._chat = chat

    def approve(
        self, who: Clicker, case_id: str, shown: MessageRef | None, *, ask: Ask | None = None
    ) -> None:
        """Approve `case_id` for `who`. With `ask` (a click), a big case is not approved: `ask`
        gets the modal where its number of locks is typed."""
        if not self._allowed(who, case_id):
            return
        if ask is not None and self._typed_above is not None:
            try:
                case = self._engine.case(case_id)
            except LockguardError as exc:  # never approved without knowing its size
                self._refused(who, case_id, exc, shown)
                return
            if case.state is State.PENDING and needs_typed_count(case, self._typed_above):
                ask(
                    approve_modal(
                        case, dry_run=self._engine.config.dry_run, typed_above=self._typed_above
                    )
                )
                return
        try:
            report = self._engine.approve(case_id, who.user)
        except SameApproverError:
            self._tell(who, case_id, same_approver_text(case_id))
            return
        except LockguardError as exc:
            self._refused(who, case_id, exc, shown)
            return
        if self._guard is not None:
            self._guard.releases(report.counts)
        self._refresh(case_id, shown)
        if report.errors:
            self._notifier.release_failed(report.case, report)

    def count_problem(self, case_id: str, typed: str) -> str:
        """What is wrong with `typed` as the number of locks of `case_id`, for the modal ("":
        right). Read from Redis: never from the modal."""
        try:
            case = self._engine.case(case_id)
        except CaseError:  # malformed or unknown: not echoed (it came from the payload)
            return (
                "This dialog names no case lockguard has; click Approve on the case's "
                "message again. Nothing was released."
            )
        except LockguardError as exc:
            return f"Nothing was released: {exc}"
        return count_problem(case, typed)

    def reject(self, who: Clicker, case_id: str, reason: str) -> None:
        if not self._allowed(who, case_id):
            return
        try:
            self._engine.reject(case_id, who.user, reason)
        except LockguardError as exc:
            self._refused(who, case_id, exc, None)
            return
        self._refresh(case_id, None)

    def _allowed(self, who: Clicker, case_id: str) -> bool:
        verdict = self._approvers.check(who.user, who.team, who.our_team)
        if not verdict.allowed:
            self._tell(who, case_id, verdict.refusal)
        return verdict.allowed

    def _refused(
        self, who: Clicker, case_id: str, exc: LockguardError, shown: MessageRef | None
    ) -> None:
        self._notifier.error_seen(exc)
        if not isinstance(exc, CaseDecidedError):
            self._tell(who, case_id, refusal_text(str(exc)))
            return
        try:
            case = self._engine.case(case_id)
            text = already_decided_text(case, now_ms=self._engine.now_ms())
        except LockguardError:
            text = refusal_text(str(exc))
        self._tell(who, case_id, text)
        self._refresh(case_id, shown)  # the message may not show the decision yet

    def _refresh(self, case_id: str, shown: MessageRef | None) -> None:
        try:
            self._posts.refresh(case_id, shown)
        except LockguardError as exc:  # decided in Redis; the message catches up next time
            self._notifier.error_seen(exc)

    def _tell(self, who: Clicker, case_id: str, text: str) -> None:
        channel = who.channel
        if not channel:
            try:
                ref = self._posts.where(case_id)
            except LockguardError:
                ref = None
            channel = ref.channel if ref is not None else self._notifier.channel
        self._chat.ephemeral(channel, who.user, text)
