"""The buttons and the modals: ack at once, then hand the decision to the worker pool.

- Approve (`lockguard_approve`, value: the case id): ack; then `Decisions.approve` on our pool.
  A case of more than `LOCKGUARD_CONFIRM_TYPED_ABOVE` locks is not approved by the click: on the
  pool, once the clicker is authorised, `views.open` shows the approve modal (through
  `quick_client`; the click's `trigger_id` lasts 3 seconds, so a modal that did not open is
  told to the clicker: click again).
- The approve modal's submission (`lockguard_approve_modal`): the number typed is checked
  against the case in Redis before the ack; wrong or missing -> ack with an error under the
  input (the modal stays open, nothing is released); right -> ack (it closes) and
  `Decisions.approve` on our pool, the approver checked again.
- Reject (`lockguard_reject`): ack, then `views.open` with the reject modal right away, on
  Bolt's thread: the click's `trigger_id` is good for 3 seconds only, so it must not queue
  behind slow work. It goes through `quick_client` (2 s, no rate-limit sleep), so it cannot
  hold Bolt's thread for long. Nothing is decided by opening the modal.
- The modal's submission (`lockguard_reject_modal`): no reason -> ack with an error under the
  input (the modal stays open); else ack (it closes) and `Decisions.reject` on our pool.

The clicker is `body.user` (id and team); our team is the bot token's, from the `auth.test`
Bolt made at start (`context.authorize_result`). The message clicked is only used to find
the case's message when Redis has no record of it; its content is never trusted.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from slack_bolt import Ack, App, BoltContext

from bot.core import logs
from bot.slack.blocks import ids
from bot.slack.blocks.approve_modal import approve_submission, count_errors
from bot.slack.blocks.messages import reject_errors, reject_modal, reject_submission
from bot.slack.blocks.modal import REASON_MAX
from bot.slack.chat import Chat, error_code, quick_client, slack_errors
from bot.slack.decisions import Clicker, Decisions
from bot.slack.work import Work
from bot.store.messages import MessageRef

_log = logs.logger("slack.actions")


def clicker(body: Mapping[str, Any], context: BoltContext) -> Clicker:
    user = body.get("user") or {}
    result = context.authorize_result
    channel = (
        (body.get("container") or {}).get("channel_id")
        or (body.get("channel") or {}).get("id")
        or ""
    )
    return Clicker(
        user=str(user.get("id") or ""),
        team=str(user.get("team_id") or ""),
        our_team=result.team_id if result is not None else None,
        channel=str(channel),
    )


def clicked_message(body: Mapping[str, Any]) -> MessageRef | None:
    container = body.get("container") or {}
    channel, ts = container.get("channel_id"), container.get("message_ts")
    if isinstance(channel, str) and isinstance(ts, str) and channel and ts:
        return MessageRef(channel, ts)
    return None


class Actions:
    def __init__(self, decisions: Decisions, chat: Chat, work: Work) -> None:
        self._decisions = decisions
        self._chat = chat
        self._work = work
        self._quick = quick_client(chat.client)

    def register(self, app: App) -> None:
        app.action(ids.APPROVE)(self.on_approve)
        app.action(ids.REJECT)(self.on_reject)
        app.view(ids.REJECT_MODAL)(self.on_reject_submitted)
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

        def ask(view: dict[str, Any]) -> None:
            self._open_approve_modal(who, case_id, trigger, view)

        self._work.submit("approve", lambda: self._decisions.approve(who, case_id, shown, ask=ask))

    def _open_approve_modal(
        self, who: Clicker, case_id: str, trigger: str, view: dict[str, Any]
    ) -> None:
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

    def on_approve_submitted(
        self, ack: Ack, body: dict[str, Any], view: dict[str, Any], context: BoltContext
    ) -> None:
        case_id, typed = approve_submission(view)
        problem = self._decisions.count_problem(case_id, typed)
        if problem:
            ack(**count_errors(problem))
            return
        ack()
        who = replace(clicker(body, context), channel="")  # told where the case's message is
        self._work.submit("approve typed", lambda: self._decisions.approve(who, case_id, None))

    def on_reject(
        self, ack: Ack, body: dict[str, Any], action: dict[str, Any], context: BoltContext
    ) -> None:
        ack()
        case_id = str(action.get("value") or "")
        try:
            self._quick.views_open(
                trigger_id=str(body.get("trigger_id") or ""), view=reject_modal(case_id[:100])
            )
        except slack_errors() as exc:
            code = error_code(exc)
            logs.event(
                _log, "reject_modal_not_opened", logging.WARNING, case_id=case_id, error=code
            )
            who = clicker(body, context)
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
        case_id, reason = reject_submission(view)
        if not reason:
            ack(**reject_errors("Say why: the reason goes in the audit log with your name."))
            return
        if len(reason) > REASON_MAX:
            ack(**reject_errors(f"At most {REASON_MAX} characters, please."))
            return
        ack()
        who = replace(clicker(body, context), channel="")  # told where the case's message is
        self._work.submit("reject", lambda: self._decisions.reject(who, case_id, reason))
