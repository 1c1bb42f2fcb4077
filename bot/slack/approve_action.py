"""Approve: the button, the approve modal of a big case, and the approval after the ack.

The engine's approval is one atomic change in Redis: of two clicks at once, one wins and the
other is told who decided first. A case above `LOCKGUARD_CONFIRM_TYPED_ABOVE` is approved only
through the modal, whose typed number is checked against Redis before the ack (the approver is
authorised again). Nothing is approved until the case's message and thread show every lock, and
a dry-run button clicked once lockguard is live approves nothing.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from slack_bolt import Ack, App, BoltContext

from bot.cases.case import State
from bot.cases.typed_count import needs_typed_count
from bot.core import logs
from bot.core.errors import CaseError, LockguardError, SameApproverError
from bot.slack.approvers import Person
from bot.slack.blocks import ids
from bot.slack.blocks.case_message import (
    approve_modal,
    approve_submission,
    count_errors,
    count_problem,
    relisted_text,
    same_approver_text,
    unlisted_text,
    went_live_text,
)
from bot.slack.blocks.guard import Guard
from bot.slack.blocks.text import refusal_text
from bot.slack.chat import Chat, error_code, quick_client, slack_errors
from bot.slack.decider import Decider, Router, clicked_message, clicker
from bot.slack.work import Work
from bot.store.message_refs import MessageRef

_log = logs.logger("slack.approval")
#: Seconds between two updates of a case's message while its release runs.
PROGRESS_EVERY_S = 3.0


def offers_dry_run(label: object) -> bool:
    """Does a button's text, as Slack sends it back, offer a dry run? Hostile: only to refuse."""
    return isinstance(label, dict) and "(dry run)" in str(label.get("text"))[:100]


class Progress:
    """`Engine.approve`'s progress callback: the case's message says how far the release is, at
    most every `every_s` seconds; a failed update is only logged."""

    def __init__(
        self, decider: Decider, case_id: str, shown: MessageRef | None, every_s: float
    ) -> None:
        self._decider = decider
        self._case_id = case_id
        self._shown = shown
        self._every_s = every_s
        self._last = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total or now - self._last < self._every_s:
            return
        self._last = now
        self._decider.refresh(self._case_id, self._shown, progress=(done, total))


class Approval:
    def __init__(
        self,
        route: Router,
        chat: Chat,
        work: Work,
        guard: Guard | None = None,
        *,
        typed_above: int | None = None,
        progress_every_s: float | None = None,
    ) -> None:
        self._progress_s = PROGRESS_EVERY_S if progress_every_s is None else progress_every_s
        self._route = route
        self._chat = chat
        self._work = work
        self._guard = guard
        self._typed_above = typed_above
        self._quick = quick_client(chat.client)

    def register(self, app: App) -> None:
        app.action(ids.APPROVE)(self.on_approve)
        app.view(ids.APPROVE_MODAL)(self.on_approve_submitted)

    def on_approve(
        self, ack: Ack, body: dict[str, Any], action: dict[str, Any], context: BoltContext
    ) -> None:
        ack()
        who, case_id, shown = (
            clicker(body, context),
            str(action.get("value") or ""),
            clicked_message(body),
        )
        trigger = str(body.get("trigger_id") or "")[:200]
        target = ids.block_target(action.get("block_id"))
        dry_shown = offers_dry_run(action.get("text"))
        self._work.submit(
            "approve",
            lambda: self.approve(
                who, case_id, shown, trigger=trigger, target=target, dry_shown=dry_shown
            ),
        )

    def on_approve_submitted(
        self, ack: Ack, body: dict[str, Any], view: dict[str, Any], context: BoltContext
    ) -> None:
        _, typed = approve_submission(view)
        case_id, target = ids.split_metadata(view.get("private_metadata"))
        problem = self.count_problem(case_id, typed, target)
        if problem:
            ack(**count_errors(problem))
            return
        ack()
        who = replace(clicker(body, context), channel="")  # told where the case's message is
        dry_shown = offers_dry_run(view.get("submit"))
        self._work.submit(
            "approve typed",
            lambda: self.approve(who, case_id, None, target=target, dry_shown=dry_shown),
        )

    def approve(
        self,
        who: Person,
        case_id: str,
        shown: MessageRef | None,
        *,
        trigger: str | None = None,
        target: str | None = None,
        dry_shown: bool = False,
    ) -> None:
        """On the pool. With `trigger` (a click), a big pending case opens the typed-count modal
        instead; `dry_shown` (the button offered a dry run) while live approves nothing."""
        if not self._route.home.allowed(who, case_id):
            return
        try:
            decider = self._route.pick(case_id, shown, target)
        except LockguardError as exc:  # on several targets: nothing decided
            self._route.home.tell(who, case_id, refusal_text(str(exc)))
            return
        if self._held_back(decider, who, case_id, shown, trigger, dry_shown):
            return
        engine = decider.engine
        try:
            report = engine.approve(
                case_id, who.user, progress=Progress(decider, case_id, shown, self._progress_s)
            )
        except SameApproverError:
            decider.tell(who, case_id, same_approver_text(case_id))
            return
        except LockguardError as exc:
            decider.refused(who, case_id, exc, shown)
            return
        if self._guard is not None:
            self._guard.releases(report.counts)
        decider.refresh(case_id, shown)
        if report.errors:
            decider.notifier.release_failed(report.case, report)

    def _held_back(
        self,
        decider: Decider,
        who: Person,
        case_id: str,
        shown: MessageRef | None,
        trigger: str | None,
        dry_shown: bool,
    ) -> bool:
        """Whatever stops this click short of approving, done; False when it may be approved."""
        engine = decider.engine
        if dry_shown and not engine.config.dry_run:
            decider.tell(who, case_id, went_live_text(case_id))
            decider.refresh(case_id, shown)
            return True
        if trigger is not None and self._typed_above is not None:
            try:
                case = engine.case(case_id)
            except LockguardError as exc:  # never approved without knowing its size
                decider.refused(who, case_id, exc, shown)
                return True
            if case.state is State.PENDING and needs_typed_count(case, self._typed_above):
                view = approve_modal(
                    case, dry_run=engine.config.dry_run, typed_above=self._typed_above
                )
                view["private_metadata"] = ids.case_metadata(case_id, self._route.name_of(decider))
                self._open_modal(who, case_id, trigger, view)
                decider.adopt(case_id, shown, relist=True)  # what the submission will rewrite
                return True
        # An approver approves only locks they could see.
        try:
            if decider.posts.listed(case_id):
                return False
        except LockguardError as exc:
            decider.refused(who, case_id, exc, None)
            return True
        if decider.adopt(case_id, shown, relist=True):  # Redis had lost where its message is
            decider.tell(who, case_id, relisted_text(case_id))
            return True  # never approved by the click that put the list in
        decider.tell(who, case_id, unlisted_text(case_id))
        return True

    def count_problem(self, case_id: str, typed: str, target: str | None = None) -> str:
        """What is wrong with `typed` ("": right), against the case in Redis, never the modal."""
        try:
            case = self._route.pick(case_id, None, target).engine.case(case_id)
        except CaseError:  # malformed or unknown: not echoed (it came from the payload)
            return (
                "This dialog names no case lockguard has; click Approve on the case's "
                "message again. Nothing was released."
            )
        except LockguardError as exc:
            return f"Nothing was released: {exc}"
        return count_problem(case, typed)

    def _open_modal(self, who: Person, case_id: str, trigger: str, view: dict[str, Any]) -> None:
        try:
            self._quick.views_open(trigger_id=trigger, view=view)
        except slack_errors() as exc:
            code = error_code(exc)
            logs.event(
                _log, "approve_modal_not_opened", logging.WARNING, case_id=case_id[:100], error=code
            )
            self._chat.ephemeral(
                who.channel,
                who.user,
                f"The approve dialog did not open (Slack: `{code}`); click Approve again.",
            )
