"""Reject: the button, the modal that asks why, and the rejection after the ack.

The modal opens right away on Bolt's thread (the click's `trigger_id` lasts 3 s) through
`quick_client`, unless a check that needs no Slack call refuses the clicker. Opening it decides
nothing; only once the clicker is authorised on the pool is the message clicked on adopted, so
anyone else's click writes nothing. The submission needs a reason (it goes in the audit log).
"""

from __future__ import annotations

import logging
from contextlib import suppress
from dataclasses import replace
from typing import Any

from slack_bolt import Ack, App, BoltContext

from bot.core import logs
from bot.core.errors import LockguardError
from bot.slack.approvers import Person
from bot.slack.blocks import ids
from bot.slack.blocks.case_message import REASON_MAX, reject_errors, reject_modal, reject_submission
from bot.slack.blocks.text import refusal_text
from bot.slack.chat import Chat, error_code, quick_client, slack_errors
from bot.slack.decider import Router, clicked_message, clicker
from bot.slack.work import Work
from bot.store.message_refs import MessageRef

_log = logs.logger("slack.rejection")


class Rejection:
    def __init__(self, route: Router, chat: Chat, work: Work) -> None:
        self._route = route
        self._chat = chat
        self._work = work
        self._quick = quick_client(chat.client)

    def register(self, app: App) -> None:
        app.action(ids.REJECT)(self.on_reject)
        app.view(ids.REJECT_MODAL)(self.on_reject_submitted)

    def on_reject(
        self, ack: Ack, body: dict[str, Any], action: dict[str, Any], context: BoltContext
    ) -> None:
        ack()
        case_id, shown = str(action.get("value") or ""), clicked_message(body)
        target = ids.block_target(action.get("block_id"))
        who = clicker(body, context)
        verdict = self._route.home.quick_verdict(who)
        if verdict is not None and not verdict.allowed:
            told = verdict.refusal
            self._work.submit("reject refused", lambda: self._route.home.tell(who, case_id, told))
            return
        view = reject_modal(case_id[:100])
        view["private_metadata"] = ids.case_metadata(case_id[:100], target)
        try:
            self._quick.views_open(trigger_id=str(body.get("trigger_id") or ""), view=view)
            self._work.submit("reject modal", lambda: self._adopt_for(who, case_id, shown, target))
        except slack_errors() as exc:
            code = error_code(exc)
            logs.event(
                _log, "reject_modal_not_opened", logging.WARNING, case_id=case_id, error=code
            )
            self._work.submit(
                "reject modal refused",
                lambda: self._chat.ephemeral(
                    who.channel,
                    who.user,
                    f"The reject dialog did not open (Slack: `{code}`); click Reject again.",
                ),
            )

    def on_reject_submitted(
        self, ack: Ack, body: dict[str, Any], view: dict[str, Any], context: BoltContext
    ) -> None:
        _, reason = reject_submission(view)
        case_id, target = ids.split_metadata(view.get("private_metadata"))
        if not reason:
            ack(**reject_errors("Say why: the reason goes in the audit log with your name."))
            return
        if len(reason) > REASON_MAX:
            ack(**reject_errors(f"At most {REASON_MAX} characters, please."))
            return
        ack()
        who = replace(clicker(body, context), channel="")  # told where the case's message is
        self._work.submit("reject", lambda: self.reject(who, case_id, reason, target))

    def reject(self, who: Person, case_id: str, reason: str, target: str | None = None) -> None:
        if not self._route.home.allowed(who, case_id):
            return
        try:
            decider = self._route.pick(case_id, None, target)
        except LockguardError as exc:  # on several targets: nothing decided
            self._route.home.tell(who, case_id, refusal_text(str(exc)))
            return
        try:
            decider.engine.reject(case_id, who.user, reason)
        except LockguardError as exc:
            decider.refused(who, case_id, exc, None)
            return
        decider.refresh(case_id, None)

    def _adopt_for(
        self, who: Person, case_id: str, shown: MessageRef | None, target: str | None = None
    ) -> None:
        """The message the modal opened from is adopted, once `who` may decide."""
        if self._route.home.allowed(who, case_id):
            with suppress(LockguardError):  # on several targets: the submission refuses, says so
                self._route.pick(case_id, shown, target).adopt(case_id, shown)
