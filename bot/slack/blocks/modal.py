"""The reject modal: why a case is rejected (required; it goes in the audit log).

The Reject button's listener opens `reject_modal(case_id)`; its `view_submission` carries the
case id in `private_metadata` and the reason in the input block (`reject_submission` reads both).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.slack.blocks import ids, kit
from bot.slack.blocks.kit import plain_text, section
from bot.slack.blocks.text import code

#: The longest reason the engine takes (`bot.cases.decision.MAX_TEXT`; a test keeps them equal).
REASON_MAX = 500


def reject_modal(case_id: str) -> dict[str, Any]:
    """A modal asking why case `case_id` is rejected."""
    return {
        "type": "modal",
        "callback_id": ids.REJECT_MODAL,
        "private_metadata": case_id,
        "title": plain_text("Reject case", kit.MODAL_TITLE),
        "submit": plain_text("Reject", kit.MODAL_BUTTON),
        "close": plain_text("Cancel", kit.MODAL_BUTTON),
        "blocks": [
            section(
                f"Reject case {code(case_id)}? None of its locks is touched, and they are "
                "not proposed again for a while unless their holder changes."
            ),
            {
                "type": "input",
                "block_id": ids.REJECT_REASON_BLOCK,
                "optional": False,
                "label": plain_text("Why reject it?", kit.INPUT_LABEL),
                "hint": plain_text("Kept in the audit log with your name.", kit.INPUT_HINT),
                "element": {
                    "type": "plain_text_input",
                    "action_id": ids.REJECT_REASON_ACTION,
                    "multiline": True,
                    "min_length": 1,
                    "max_length": REASON_MAX,
                    "placeholder": plain_text(
                        "e.g. the nightly export still runs; it holds this lock for hours",
                        kit.PLACEHOLDER,
                    ),
                },
            },
        ],
    }


def reject_submission(view: Mapping[str, Any]) -> tuple[str, str]:
    """(case id, reason) from the modal's `view_submission` payload `view`; either may be ""
    when the payload is not what `reject_modal` built (the engine then refuses it)."""
    case_id = view.get("private_metadata")
    values = (view.get("state") or {}).get("values") or {}
    field = (values.get(ids.REJECT_REASON_BLOCK) or {}).get(ids.REJECT_REASON_ACTION) or {}
    reason = field.get("value") if isinstance(field, Mapping) else None
    return (
        case_id.strip() if isinstance(case_id, str) else "",
        reason.strip() if isinstance(reason, str) else "",
    )


def reject_errors(message: str) -> dict[str, Any]:
    """The `ack(...)` body that shows `message` under the reason input and keeps the modal."""
    return {"response_action": "errors", "errors": {ids.REJECT_REASON_BLOCK: message[:150]}}
