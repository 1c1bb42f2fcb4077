"""The approve modal of a big case: the approver types the number of its locks.

A case of more than `LOCKGUARD_CONFIRM_TYPED_ABOVE` locks is not approved by a click (one
click in a confirm dialog once released 100,000 locks): its Approve button opens
`approve_modal(case, ...)`, which says what approving does, shows its first locks as the case
message does, and asks for the number. Its `view_submission` carries the case id in
`private_metadata`; `approve_submission(view)` reads it and what was typed, both cut to a bound
(hostile until checked); `count_problem(case, typed)` says what is wrong with the number, and
`count_errors(...)` is the ack that shows it under the input (nothing is released then).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.cases.case import Case
from bot.cases.typed_count import TYPED_MAX, typed_number
from bot.core.display import duration
from bot.slack.blocks import ids, kit
from bot.slack.blocks.kit import plain_text, section
from bot.slack.blocks.text import REASON_LABEL, code, count, lock_text

#: Locks of the case the modal lists (the case message shows them all, up to its preview).
SHOWN = 5
#: A case id is "LG-YYMMDD-xxxxxx"; anything longer in `private_metadata` is not ours.
_CASE_ID_MAX = 40


def approve_modal(case: Case, *, dry_run: bool, typed_above: int) -> dict[str, Any]:
    """A modal asking to type the number of locks of `case` to approve it."""
    n = case.total_locks
    what = (
        f"Dry run: the approval is recorded; none of its {count(n, 'lock')} is touched."
        if dry_run
        else f"Approving deletes each of the {count(n, 'lock')}, only if the holder shown still "
        "holds it, and announces each release."
    )
    label = (
        f"Type {n} to approve case {case.id} in dry run (none of its {n:,} locks is touched)"
        if dry_run
        else f"Type {n} to release {count(n, 'lock')} from case {case.id}"
    )
    return {
        "type": "modal",
        "callback_id": ids.APPROVE_MODAL,
        "private_metadata": case.id,
        "title": plain_text("Approve case", kit.MODAL_TITLE),
        "submit": plain_text("Approve (dry run)" if dry_run else "Release", kit.MODAL_BUTTON),
        "close": plain_text("Cancel", kit.MODAL_BUTTON),
        "blocks": [
            section(
                f"*Case {code(case.id)}* holds *{count(n, 'lock')}*, more than "
                f"{typed_above:,} (`LOCKGUARD_CONFIRM_TYPED_ABOVE`): approving it takes "
                f"their number, typed. {what}"
            ),
            section(_first_locks(case, n)),
            {
                "type": "input",
                "block_id": ids.APPROVE_COUNT_BLOCK,
                "optional": False,
                "label": plain_text(label, kit.INPUT_LABEL),
                "hint": plain_text(
                    "The number of locks in the case, digits only (commas between "
                    "thousands are fine).",
                    kit.INPUT_HINT,
                ),
                "element": {
                    "type": "plain_text_input",
                    "action_id": ids.APPROVE_COUNT_ACTION,
                    "min_length": 1,
                    "max_length": TYPED_MAX,
                    "placeholder": plain_text("the number of locks", kit.PLACEHOLDER),
                },
            },
        ],
    }


def _first_locks(case: Case, n: int) -> str:
    lines = [
        f"{i}. {lock_text(lk.key, lk.big)} · {REASON_LABEL[lk.reason]} · "
        f"held {duration(lk.held_seconds)}"
        for i, lk in enumerate(case.locks[:SHOWN], 1)
    ]
    more = n - len(lines)
    if more > 0:
        lines.append(f"…and {count(more, 'more lock')}, listed in the case's message.")
    return "*Its first locks*\n" + "\n".join(lines)


def approve_submission(view: Mapping[str, Any]) -> tuple[str, str]:
    """(case id, what was typed) from the modal's `view_submission` payload `view`, each cut
    to its bound; "" when the payload is not what `approve_modal` built."""
    case_id = view.get("private_metadata")
    values = (view.get("state") or {}).get("values") or {}
    block = values.get(ids.APPROVE_COUNT_BLOCK) if isinstance(values, Mapping) else None
    field = block.get(ids.APPROVE_COUNT_ACTION) if isinstance(block, Mapping) else None
    typed = field.get("value") if isinstance(field, Mapping) else None
    return (
        case_id.strip()[:_CASE_ID_MAX] if isinstance(case_id, str) else "",
        typed.strip()[: TYPED_MAX + 1] if isinstance(typed, str) else "",
    )


def count_problem(case: Case, typed: str) -> str:
    """What is wrong with `typed` as the number of locks of `case` ("" when it is right)."""
    n = case.total_locks
    got = typed_number(typed)
    if got == n:
        return ""
    said = (
        "Nothing typed"
        if not typed
        else ("That is not a number" if got is None else f"{got:,} is not the number")
    )
    return f"{said}: type {n} to approve the {count(n, 'lock')} of this case. Nothing was released."


def count_errors(message: str) -> dict[str, Any]:
    """The `ack(...)` body that shows `message` under the number input and keeps the modal."""
    return {"response_action": "errors", "errors": {ids.APPROVE_COUNT_BLOCK: message[:150]}}
