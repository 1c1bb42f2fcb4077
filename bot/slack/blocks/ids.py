"""Every id Slack sends back to lockguard: the builders set them, the listeners match on them.

Stable: the buttons' action ids are `lockguard_approve` and `lockguard_reject`, and a
button's `value` is only the case id, nothing else.

In a fleet, where the case is kept rides beside it, so that a click reaches one Redis: the
buttons' actions block is `lockguard_decision:<target>` and a modal's `private_metadata`
`<case id>:<target>` (`decision_block`, `case_metadata`). Both come back from Slack as hostile
input: the target only says where to look (`bot.slack.decider.Router` checks the name and that
the case is there); an old message's block (`lockguard_decision`) or metadata (the case id
alone) has none, and the click is looked for in every target as before.
"""

from __future__ import annotations

#: The Approve button (value: the case id).
APPROVE = "lockguard_approve"
#: The Reject button (value: the case id); its listener opens the reject modal.
REJECT = "lockguard_reject"
#: The actions block holding both buttons.
DECISION_BLOCK = "lockguard_decision"

#: The reject modal's `callback_id` (`view_submission`); `private_metadata` is the case id.
REJECT_MODAL = "lockguard_reject_modal"
#: The modal's input block and its text input: the reason is read from
#: `view["state"]["values"][REJECT_REASON_BLOCK][REJECT_REASON_ACTION]["value"]`.
REJECT_REASON_BLOCK = "lockguard_reject_reason"
REJECT_REASON_ACTION = "lockguard_reject_reason_input"

#: The approve modal of a big case (more than LOCKGUARD_CONFIRM_TYPED_ABOVE locks): its
#: `callback_id`; `private_metadata` is the case id; the number of locks is typed in
#: `view["state"]["values"][APPROVE_COUNT_BLOCK][APPROVE_COUNT_ACTION]["value"]`.
APPROVE_MODAL = "lockguard_approve_modal"
APPROVE_COUNT_BLOCK = "lockguard_approve_count"
APPROVE_COUNT_ACTION = "lockguard_approve_count_input"

#: The slash command.
COMMAND = "/lockguard"

#: Between the block id (or the case id) and the target's name.
TARGET_SEP = ":"
_TARGET_MAX = 100  # a target's name is at most 40; anything longer is refused, not cut to fit


def decision_block(target: str | None = None) -> str:
    """The decision actions block's id: with the fleet target that holds the case."""
    return f"{DECISION_BLOCK}{TARGET_SEP}{target}" if target else DECISION_BLOCK


def block_target(block_id: object) -> str | None:
    """The target a decision block names, unchecked (None: an old block, or not ours)."""
    prefix = DECISION_BLOCK + TARGET_SEP
    if isinstance(block_id, str) and block_id.startswith(prefix):
        return block_id[len(prefix) :][:_TARGET_MAX]
    return None


def case_metadata(case_id: str, target: str | None = None) -> str:
    """A modal's `private_metadata`: the case id, and the target that holds it."""
    return f"{case_id}{TARGET_SEP}{target}" if target else case_id


def split_metadata(raw: object) -> tuple[str, str | None]:
    """(case id, target unchecked or None) from a modal's `private_metadata`."""
    text = raw.strip()[:200] if isinstance(raw, str) else ""
    case_id, sep, target = text.partition(TARGET_SEP)
    return case_id, (target[:_TARGET_MAX] if sep else None)
