"""Every id Slack sends back to lockguard: the builders set them, the listeners match on them.

Stable: the buttons' action ids are `lockguard_approve` and `lockguard_reject`, and a
button's `value` is only the case id, nothing else.
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

#: Action ids the app answers to (for registering listeners).
ACTIONS = (APPROVE, REJECT)
