"""Every id Slack sends back to lockguard: the builders set them, the listeners match on them.
The action ids and a button's `value` (the case id alone) are a stable contract.

In a fleet the case's target rides in the actions block id (`lockguard_decision:<target>`) and a
modal's `private_metadata` (`<case id>:<target>`). Both come back as hostile input: the target
only says where to look (`bot.slack.decider.Router` checks it); without one, every target is
searched.
"""

from __future__ import annotations

#: The Approve button (value: the case id).
APPROVE = "lockguard_approve"
#: The Reject button (value: the case id); its listener opens the reject modal.
REJECT = "lockguard_reject"
#: The actions block holding both buttons.
DECISION_BLOCK = "lockguard_decision"

#: The modals' `callback_id`s, and the input block and text input each is read from.
REJECT_MODAL = "lockguard_reject_modal"
REJECT_REASON_BLOCK = "lockguard_reject_reason"
REJECT_REASON_ACTION = "lockguard_reject_reason_input"
APPROVE_MODAL = "lockguard_approve_modal"
APPROVE_COUNT_BLOCK = "lockguard_approve_count"
APPROVE_COUNT_ACTION = "lockguard_approve_count_input"

COMMAND = "/lockguard"
TARGET_SEP = ":"
_TARGET_MAX = 100  # a target's name is at most 40; anything longer is refused, not cut to fit


def decision_block(target: str | None = None) -> str:
    return f"{DECISION_BLOCK}{TARGET_SEP}{target}" if target else DECISION_BLOCK


def block_target(block_id: object) -> str | None:
    """The target a decision block names, unchecked (None: an old block, or not ours)."""
    prefix = DECISION_BLOCK + TARGET_SEP
    if isinstance(block_id, str) and block_id.startswith(prefix):
        return block_id[len(prefix) :][:_TARGET_MAX]
    return None


def case_metadata(case_id: str, target: str | None = None) -> str:
    return f"{case_id}{TARGET_SEP}{target}" if target else case_id


def split_metadata(raw: object) -> tuple[str, str | None]:
    """(case id, target unchecked or None) from a modal's `private_metadata`."""
    text = raw.strip()[:200] if isinstance(raw, str) else ""
    case_id, sep, target = text.partition(TARGET_SEP)
    return case_id, (target[:_TARGET_MAX] if sep else None)
