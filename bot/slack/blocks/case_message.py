"""A case in Slack, built from the case alone as Redis holds it: its message, its line in every
list of cases, the two modals of its buttons, and the replies to a click that decides nothing.

Slack's copy of a message may be stale, so `chat.update` always gets the whole `case_message`.
A message that cannot list every lock gets the case's whole list as a file in its thread, and
its buttons work only once that is there: they never offer a lock not shown. A case above
`LOCKGUARD_CONFIRM_TYPED_ABOVE` is approved by typing its number of locks, never by one click
(one click in a confirm dialog once released 100,000 locks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot.cases.case import Case, CaseLock, State
from bot.cases.typed_count import TYPED_MAX, typed_number
from bot.core.display import duration, ttl
from bot.slack.blocks import ids, kit
from bot.slack.blocks.findings import (
    DRY_RUN_NOTICE,
    UNLISTED_NOTICE,
    FindingsPost,
    attachment_name,
    decision_buttons,
)
from bot.slack.blocks.kit import (
    BUDGET,
    Block,
    Message,
    context,
    header,
    message,
    pack,
    plain_text,
    section,
)
from bot.slack.blocks.text import (
    OUTCOME_WORDS,
    OWNER_LIMIT,
    REASON_LABEL,
    STATE_WORDS,
    code,
    count,
    cut,
    date,
    in_order,
    is_group_id,
    is_user_id,
    layout_text,
    lock_text,
    mention,
    outcome_words,
    plain,
    redis_text,
)
from bot.slack.blocks.text import word as shown_word

#: A reject reason is shown in a case's line up to this many characters.
REASON_LIMIT = 300
#: Locks of the case the approve modal lists.
MODAL_LOCKS = 5
#: A case id is "LG-YYMMDD-xxxxxx"; anything longer in `private_metadata` is not ours.
_CASE_ID_MAX = 40
#: `bot.cases.decision.MAX_TEXT` (a test keeps them equal).
REASON_MAX = 500


def state_word(
    case: Case,
    now_ms: int,
    approvals: list[tuple[str, int]] | None = None,
    required_approvals: int = 1,
) -> str:
    """Released / Rejected / Expired / Incomplete / Waiting for a second approval / …"""
    state = case.effective_state(now_ms)
    if state is State.PENDING and approvals and len(approvals) < required_approvals:
        if required_approvals == 2:
            return "Waiting for a second approval"
        return f"Waiting for another approval ({len(approvals)} of {required_approvals})"
    if state is State.APPROVED and case.dry_run:
        return "Approved (dry run)"
    if case.nothing_released:
        return "Closed, nothing released"
    return STATE_WORDS[state]


def case_message(
    case: Case,
    *,
    endpoint: str,
    now_ms: int,
    dry_run: bool,
    approvals: list[tuple[str, int]] | None = None,
    required_approvals: int = 1,
    verification: str | None = None,
    typed_above: int | None = None,
    progress: tuple[int, int] | None = None,
) -> Message:
    """The case's message; `approvals` are the (Slack user id, ms) approvals so far. Only a
    pending case has buttons."""
    return _case_message(
        case,
        endpoint=endpoint,
        now_ms=now_ms,
        dry_run=dry_run,
        approvals=approvals,
        required_approvals=required_approvals,
        verification=verification,
        typed_above=typed_above,
        progress=progress,
    )[0]


def case_post(case: Case, *, endpoint: str, now_ms: int, **options: Any) -> FindingsPost:
    """The case's message posted on its own; `attach` when its thread needs the whole list."""
    main, used = _case_message(case, endpoint=endpoint, now_ms=now_ms, thread=True, **options)
    return FindingsPost(main, attach=case.total_locks > used)


def _case_message(
    case: Case,
    *,
    endpoint: str,
    now_ms: int,
    dry_run: bool,
    approvals: list[tuple[str, int]] | None = None,
    required_approvals: int = 1,
    verification: str | None = None,
    typed_above: int | None = None,
    thread: bool = False,
    approvable: bool = True,
    progress: tuple[int, int] | None = None,
) -> tuple[Message, int]:
    """The message and how many locks it lists; not `approvable` (an incomplete thread):
    Reject alone."""
    state = case.effective_state(now_ms)
    word = state_word(case, now_ms, approvals, required_approvals)
    dry = case.dry_run or (state is State.PENDING and dry_run)
    head: list[Block] = [
        header(f"Case {case.id}: {word}" + (" · dry run" if dry and "dry run" not in word else ""))
    ]
    if dry:
        head.append(section(DRY_RUN_NOTICE))
    head.append(section(_decision(case, state, now_ms, approvals or [])))
    tail: list[Block] = []
    if progress is not None and state is State.APPROVED:
        tail.append(section(progress_text(*progress, now_ms)))
    counts = _counts(case)
    if counts:
        tail.append(section(counts))
    notes = _events(case)
    if verification:
        notes.append(plain(verification, 1000))
    notes.append(f"Redis {code(endpoint)} · case {code(case.id)} · opened {date(case.created_ms)}")
    tail.append(context(*notes))
    if state is State.PENDING and not approvable:
        tail.append(context(UNLISTED_NOTICE.format(expires=date(case.expires_ms))))
    if state is State.PENDING:
        tail.append(decision_buttons(case, dry_run, typed_above, approvable=approvable))

    total = case.total_locks
    more_room = 300
    room = BUDGET - kit.blocks_size(head + tail) - more_room
    outcomes = {str(o.get("key_hex")): o for o in case.outcomes}
    lines = (_line(i, lk, outcomes.get(lk.key.hex())) for i, lk in enumerate(case.locks, 1))
    body, used = pack(lines, budget=room, max_blocks=kit.MESSAGE_BLOCKS - len(head) - len(tail) - 1)
    if total > used:
        body.append(context(_more(case, total - used, thread)))
    text = f"lockguard case {case.id}: {word}" + (" (dry run)" if dry else "")
    return message(text, head + body + tail), used


def progress_text(done: int, total: int, now_ms: int) -> str:
    return f"*Releasing…* {done:,} of {count(total, 'lock')} done (as of {date(now_ms)})."


def _more(case: Case, unlisted: int, thread: bool) -> str:
    more = f"…and {unlisted:,} more {'lock' if unlisted == 1 else 'locks'} in this case"
    if thread:
        return f"{more}: every lock is in `{attachment_name(case.id)}` in the thread."
    return f"{more} (the counts cover every one; `lockguard cases {case.id}` lists them all)."


def _decision(case: Case, state: State, now_ms: int, approvals: list[tuple[str, int]]) -> str:
    n = count(case.total_locks, "lock")
    who = mention(case.decided_by) if case.decided_by else "someone"
    when = f" at {date(case.decided_ms)}" if case.decided_ms else ""
    if state is State.PENDING:
        lines = [
            f"{n} to decide; expires {date(case.expires_ms)} "
            f"(in {duration((case.expires_ms - now_ms) / 1000)})."
        ]
        lines += [
            f"Approved by {mention(user)} at {date(ms)} — waiting for a second approver."
            for user, ms in approvals
        ]
        return "\n".join(lines)
    if state is State.OPENING:
        return f"A scan is still putting locks in this case ({n} so far); it cannot be decided yet."
    if state is State.EXPIRED:
        return (
            f"No decision before {date(case.expires_ms)}: it can no longer be approved. "
            "The next scan opens a fresh case for locks still abandoned."
        )
    if state is State.REJECTED:
        reason = f": “{plain(case.decision_reason, 600)}”" if case.decision_reason else "."
        return (
            f"Rejected by {who}{when}{reason}\nNone of its {n} was touched; they are not "
            "proposed again for a while unless their holder changes."
        )
    released = case.outcome_counts.get("released", 0)
    if state is State.APPROVED:
        if case.dry_run:
            return (
                f"Approved by {who}{when} in dry run: no lock was touched and nothing was "
                f"published ({n} would have been released if still held as shown)."
            )
        return f"Approved by {who}{when}; releasing {n}…"
    if state is State.INCOMPLETE:
        errors = case.outcome_counts.get("error", 0)
        return (
            f"Approved by {who}{when}. {released:,} of {n} released; "
            f"{count(errors, 'lock')} errored and can be retried: `lockguard approve "
            f"{case.id} --by NAME --resume` (locks already decided keep their outcome)."
        )
    return f"Approved by {who}{when}. {released:,} of {n} released."


def _counts(case: Case) -> str:
    if not case.outcome_counts:
        return ""
    parts = [
        f"{case.outcome_counts[k]:,} {outcome_words(k)}"
        for k in in_order(case.outcome_counts, OUTCOME_WORDS)
        if case.outcome_counts[k]
    ]
    return f"*Outcomes ({count(case.total_locks, 'lock')})*: " + " · ".join(parts)


def _events(case: Case) -> list[str]:
    released = [o for o in case.outcomes if o.get("outcome") == "released"]
    if not released:
        return []
    published = sum(1 for o in released if o.get("event_published"))
    if not published:
        return ["No release event was published for the released locks shown."]
    return [
        f"Release events published for {published:,} of the {len(released):,} released locks shown."
    ]


def _line(i: int, lk: CaseLock, outcome: dict[str, object] | None) -> str:
    line = (
        f"{i}. {lock_text(lk.key, lk.big)} · {REASON_LABEL[lk.reason]} · held "
        f"{duration(lk.held_seconds)} · TTL {ttl(lk.ttl_ms)} · {layout_text(lk.layout, lk.counter)}"
    )
    if lk.renewal:
        line += f"\n      {plain(lk.renewal, 300)}"
    if outcome is None:
        return line
    name = str(outcome.get("outcome", ""))
    line += f" → *{outcome_words(name)}*"
    if outcome.get("event_published"):
        line += " · event published"
    detail = str(outcome.get("detail") or "")
    if detail and name not in ("released", "dry_run"):
        line += f"\n      {plain(detail, 300)}"
    return line


def case_state(case: Case, now_ms: int) -> str:
    """The case's state in words; a pending case with an approval waits for one more."""
    approvals = list(case.approvals)
    return state_word(case, now_ms, approvals, len(approvals) + 1 if approvals else 1)


def outcomes_text(counts: Mapping[str, int]) -> str:
    """`2 released · 1 already gone`."""
    names = in_order(counts, OUTCOME_WORDS)
    return " · ".join(
        f"{counts[k]:,} {shown_word(outcome_words(k), 60)}" for k in names[:8] if counts[k]
    )


def case_line(case: Case, now_ms: int, *, notify: bool = True, live: bool = False) -> str:
    """The case in a line or three. `notify=False` (the daily digest) pings nobody: deciders
    as code; `live=True` (the Home tab) adds time left, approvals so far, how to resume."""
    state = case.effective_state(now_ms)
    person = mention if notify else (lambda who: redis_text(who, OWNER_LIMIT))
    case_id = cut(case.id, 40)
    line = (
        f"{code(case_id)} · *{case_state(case, now_ms)}* · "
        f"{count(case.total_locks, 'lock')} · opened {date(case.created_ms)}"
    )
    if state is State.PENDING:
        line += f" · expires {date(case.expires_ms)}"
        if live:
            line += f" (in {duration(max(case.expires_ms - now_ms, 0) / 1000)})"
            if case.approvals:
                line += " · approved so far by " + ", ".join(
                    person(who) for who, _ in case.approvals[:5]
                )
    if case.decided_by and not (live and state is State.PENDING):
        line += f" · {'approved' if live else 'decided'} by {person(case.decided_by)}"
        if case.decided_ms:
            line += f" at {date(case.decided_ms)}"
    if case.decision_reason:
        line += f"\n      “{plain(case.decision_reason, REASON_LIMIT)}”"
    if case.outcome_counts:
        line += "\n      " + outcomes_text(case.outcome_counts)
    if live and state is State.INCOMPLETE:
        line += (
            f"\n      {code(f'lockguard approve {case_id} --by NAME --resume')} "
            "retries the locks that errored"
        )
    return line


def approve_modal(case: Case, *, dry_run: bool, typed_above: int) -> dict[str, Any]:
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
        for i, lk in enumerate(case.locks[:MODAL_LOCKS], 1)
    ]
    more = n - len(lines)
    if more > 0:
        lines.append(f"…and {count(more, 'more lock')}, listed in the case's message.")
    return "*Its first locks*\n" + "\n".join(lines)


def approve_submission(view: Mapping[str, Any]) -> tuple[str, str]:
    """(case id, what was typed), each cut to its bound (hostile until checked)."""
    case_id, typed = _submitted(view, ids.APPROVE_COUNT_BLOCK, ids.APPROVE_COUNT_ACTION)
    return case_id[:_CASE_ID_MAX], typed[: TYPED_MAX + 1]


def count_problem(case: Case, typed: str) -> str:
    """What is wrong with `typed` as the case's number of locks ("" when it is right)."""
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
    """The `ack(...)` body that shows `message` under the input and keeps the modal."""
    return {"response_action": "errors", "errors": {ids.APPROVE_COUNT_BLOCK: message[:150]}}


def reject_modal(case_id: str) -> dict[str, Any]:
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
    """(case id, reason); either may be "" (the engine then refuses it)."""
    return _submitted(view, ids.REJECT_REASON_BLOCK, ids.REJECT_REASON_ACTION)


def _submitted(view: Mapping[str, Any], block: str, action: str) -> tuple[str, str]:
    meta = view.get("private_metadata")
    values = (view.get("state") or {}).get("values") or {}
    field = values.get(block) if isinstance(values, Mapping) else None
    field = field.get(action) if isinstance(field, Mapping) else None
    value = field.get("value") if isinstance(field, Mapping) else None
    return (
        meta.strip() if isinstance(meta, str) else "",
        value.strip() if isinstance(value, str) else "",
    )


def reject_errors(message: str) -> dict[str, Any]:
    return {"response_action": "errors", "errors": {ids.REJECT_REASON_BLOCK: message[:150]}}


def approvers_note(
    users: Sequence[str] = (), group: str = "", required: int = 1, *, notify: bool = True
) -> str:
    """Who may decide; without `notify`, ids as code instead of mentions."""

    def who(user: str) -> str:
        if notify and is_user_id(user):
            return f"<@{user}>"
        return code(user[:40])

    names = [who(u) for u in users if u]
    if group:
        names.append(
            f"<!subteam^{group}>"
            if notify and is_group_id(group)
            else f"the group {code(group[:40])}"
        )
    two = " Two different approvers are needed." if required >= 2 else ""
    if not names:
        return "Any member of this channel may decide." + two
    return "Approvers: " + ", ".join(names) + "." + two


def unlisted_text(case_id: str) -> str:
    return (
        f"Nothing was approved: not every lock of case {code(case_id[:40])} is shown yet. "
        "Its thread lists them; click Approve again once it has. If the message says Slack "
        "did not take the whole thread, reject the case or let it expire."
    )


def relisted_text(case_id: str) -> str:
    """Redis had lost the case's message: the one clicked on is now the case's."""
    return (
        f"Nothing was approved: lockguard had lost track of the message of case "
        f"{code(case_id[:40])}. It now uses this one, with the case's whole list in its thread; "
        "look at the list, then click Approve again."
    )


def went_live_text(case_id: str) -> str:
    """A dry-run button clicked while lockguard is live: it never approves."""
    return (
        f"Nothing was approved: the button on case {code(case_id[:40])} offered a dry run, and "
        "lockguard is live now (LOCKGUARD_DRY_RUN=false): an approval would delete its locks. "
        "The message now shows the live buttons; click Approve there if you mean to release them."
    )


def not_approver_text(approvers: str = "") -> str:
    return "You are not an approver for lockguard." + (f" {approvers}" if approvers else "")


def already_decided_text(case: Case, *, now_ms: int) -> str:
    state = case.effective_state(now_ms)
    if state is State.EXPIRED:
        return (
            f"Case {code(case.id)} expired at {date(case.expires_ms)} before a decision; "
            "the next scan opens a fresh case."
        )
    if not case.decided_by:
        return f"Case {code(case.id)} is already {state_word(case, now_ms).lower()}."
    when = f" at {date(case.decided_ms)}" if case.decided_ms else ""
    return (
        f"Case {code(case.id)} was already decided by {mention(case.decided_by)}{when}: "
        f"{state_word(case, now_ms).lower()}."
    )


def same_approver_text(case_id: str) -> str:
    return (
        f"You already approved case {code(case_id)}; a second approver, someone else, "
        "must approve it too."
    )
