"""The message a scan posts: its findings with the case to decide, or that all is healthy.

The worst locks that fit go in the message and the rest in thread replies, so every flagged lock
kept is visible somewhere. When a pending case holds locks the message does not show, the thread
gets the case's whole list as a file instead (`attach`), and the case is approvable only once it
is there. Buttons carry only the case id.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from bot.cases.case import Case, State
from bot.cases.proposal import CASE_LIMIT
from bot.core.display import duration, ttl
from bot.core.impact import impact_words
from bot.core.model import FINDING_REASONS, Finding, Reason
from bot.core.waitfor import cycle_text
from bot.scan.result import ScanResult
from bot.scan.types import MAX_KEY_BYTES
from bot.slack.blocks import ids, kit
from bot.slack.blocks.kit import (
    BUDGET,
    Block,
    Message,
    actions,
    button,
    confirm,
    context,
    divider,
    fields,
    header,
    message,
    pack,
    section,
)
from bot.slack.blocks.text import (
    REASON_LABEL,
    REASON_WORDS,
    code,
    count,
    date,
    layout_text,
    lock_text,
    mention,
    owner_text,
    plain,
    redis_text,
)

#: Flagged locks the channel message itself lists at most; the rest go to the thread.
MAX_SHOWN = 20
DRY_RUN_NOTICE = (
    "*Dry run* (`LOCKGUARD_DRY_RUN=true`): a decision is recorded, but no lock "
    "is touched and no event is published."
)

#: Said instead of the Approve button when the thread did not list every lock of the case.
UNLISTED_NOTICE = (
    ":warning: Slack did not take the case's list (its file needs the app's `files:write` "
    "scope) or the whole thread, so not every lock of this case is shown and it cannot be "
    "approved here. Reject it, approve it with `lockguard approve` (which lists every lock: "
    "`lockguard cases CASE`), or let it expire ({expires}): the next scan offers its locks again."
)


@dataclass(frozen=True, slots=True)
class FindingsPost:
    """The channel message, and the thread replies that list the flagged locks it could not."""

    message: Message
    replies: list[Message] = field(default_factory=list)
    #: The thread gets the case's whole list as a file instead of `replies`.
    attach: bool = False


def _title(result: ScanResult, endpoint: str) -> str:
    renewing = result.by_reason.get(Reason.LONG_HELD_RENEWING, 0)
    title = f"lockguard: {count(result.findings - renewing, 'lock')} flagged on {endpoint}"
    return title + (f", {renewing:,} more long held (renewing)" if renewing else "")


def findings_message(
    result: ScanResult,
    case: Case | None,
    *,
    endpoint: str,
    dry_run: bool,
    auto_remediate: bool,
    approvers_note: str,
    typed_above: int | None = None,
    approvable: bool = True,
) -> FindingsPost:
    """The scan's findings and a pending `case`'s buttons. `approvers_note` is mrkdwn (it may
    hold mentions), not escaped; not `approvable` (not every lock shown): Reject alone."""
    flagged = [f for f in result.worst if f.reason in FINDING_REASONS]
    title = _title(result, endpoint)
    head: list[Block] = [header(("Dry run · " if dry_run else "") + title)]
    if dry_run:
        head.append(section(DRY_RUN_NOTICE))
    head.append(_summary(result, endpoint))

    tail: list[Block] = [divider(), section(_case_text(result, case, dry_run, auto_remediate))]
    tail.append(
        context(
            scan_origin(result),
            approvers_note or "Any member of this channel may decide.",
            "Auto-remediation "
            + ("on: each scan opens a case for approval" if auto_remediate else "off"),
            *filter(None, [result.paced_words()]),
        )
    )
    pending = case if case is not None and case.state is State.PENDING else None
    if pending is not None and not approvable:
        tail.append(context(UNLISTED_NOTICE.format(expires=date(pending.expires_ms))))
    if pending is not None:
        tail.append(decision_buttons(pending, dry_run, typed_above, approvable=approvable))

    more_room = len(_more_text(0, result.findings, len(flagged)))
    room = BUDGET - kit.blocks_size(head + tail) - more_room - 200
    shown = flagged[:MAX_SHOWN]
    body, used = pack(
        (_line(i, f) for i, f in enumerate(shown, 1)),
        budget=room,
        max_blocks=kit.MESSAGE_BLOCKS - len(head) - len(tail) - 1,
    )
    attach = pending is not None and (used < len(flagged) or result.findings > len(flagged))
    more = (
        attach_text(pending.total_locks, used, pending.id)
        if attach and pending is not None
        else _more_text(used, result.findings, len(flagged))
    )
    if more:
        body.append(context(more))
    text = (
        ("[dry run] " if dry_run else "")
        + title
        + (f"; case {pending.id} awaits a decision" if pending is not None else "")
    )
    main = message(text, head + body + tail)
    if attach:
        return FindingsPost(main, attach=True)
    return FindingsPost(main, _replies(flagged, used, result.findings, endpoint))


def attachment_name(case_id: str) -> str:
    return f"lockguard-{case_id}.csv"


def attach_text(locks: int, shown: int, case_id: str) -> str:
    return (
        f"The worst {shown:,} shown here. Every one of the case's {count(locks, 'lock')} "
        f"(key, layout, verdict, held, TTL, holder) is in `{attachment_name(case_id)}` in "
        "this message's thread: the case can be approved once it is there."
    )


def healthy_message(result: ScanResult, *, endpoint: str) -> Message:
    not_locks = result.by_reason.get(Reason.NOT_A_LOCK, 0)
    locks = result.scanned - not_locks
    if result.scanned == 0:
        words = "No keys match the lock patterns."
    else:
        words = (
            f"{count(locks, 'lock')}, all healthy; oldest held "
            f"{duration(result.oldest_held_seconds)}."
        )
    if not_locks:
        words += (
            f" {count(not_locks, 'key')} under the patterns "
            f"{'is not a lock' if not_locks == 1 else 'are not locks'}"
            " (counted, never touched)."
        )
    blocks = [
        header(f"lockguard: all healthy on {endpoint}"),
        section(words),
        context(
            f"Redis {code(endpoint)} · {count(result.scanned, 'key')} scanned in "
            f"{result.duration_seconds:.1f}s",
            scan_origin(result),
            *filter(None, [result.paced_words()]),
        ),
    ]
    return message(
        f"lockguard: all healthy on {endpoint} ({count(locks, 'lock')}, oldest held "
        f"{duration(result.oldest_held_seconds)})",
        blocks,
    )


_ORIGIN = {
    "schedule": "a scheduled scan",
    "webhook": "asked through the webhook",
    "cli": "asked from the CLI",
}


def scan_origin(result: ScanResult) -> str:
    """Which patterns the scan covered and who asked for it."""
    shown = ", ".join(redis_text(p, 100) for p in result.patterns[:5])
    if len(result.patterns) > 5:
        shown += f" and {len(result.patterns) - 5} more"
    if result.narrowed:
        shown += " (narrowing LOCKGUARD_LOCK_PATTERNS)"
    if result.trigger == "slash":
        who = (
            f"asked by {mention(result.requested_by)} with `/lockguard scan`"
            if result.requested_by
            else "asked with `/lockguard scan`"
        )
    else:
        who = _ORIGIN.get(result.trigger, "")
    return "Patterns " + (shown or "as configured") + (f" · {who}" if who else "")


def _summary(result: ScanResult, endpoint: str) -> Block:
    """The scan in numbers; a lock its owner keeps renewing looks alive: not counted as flagged."""
    renewing = result.by_reason.get(Reason.LONG_HELD_RENEWING, 0)
    by = ", ".join(
        f"{result.by_reason[r]:,} {REASON_LABEL[r]}"
        for r in sorted(FINDING_REASONS, key=lambda r: list(Reason).index(r))
        if result.by_reason.get(r) and r is not Reason.LONG_HELD_RENEWING
    )
    items = [
        f"*Redis*\n{code(endpoint)}",
        f"*Keys scanned*\n{result.scanned:,}",
        f"*Locks flagged*\n{result.findings - renewing:,}" + (f" ({by})" if by else ""),
        f"*Oldest held*\n{duration(result.oldest_held_seconds)}",
    ]
    if renewing:
        items.append(f"*Long held, renewing*\n{renewing:,} (looks alive; never offered)")
    not_locks = result.by_reason.get(Reason.NOT_A_LOCK, 0)
    if not_locks:
        items.append(f"*Not locks*\n{not_locks:,} (never touched)")
    if result.stats.oversized:
        items.append(
            f"*Oversized keys*\n{result.stats.oversized:,} over {MAX_KEY_BYTES:,} bytes "
            f"({len(result.stats.oversized_read):,} read in Redis, never whole; "
            "`scan --json` names them)"
        )
    return fields(*items)


def _age(f: Finding) -> str:
    return f"held {duration(f.held_seconds)}" + (" (first seen now)" if f.observations <= 1 else "")


def _line(i: int, f: Finding) -> str:
    """One flagged lock in the channel message; in the thread it is `_compact`, one line."""
    line = (
        f"{i}. {lock_text(f.key, f.big)} · *{REASON_LABEL[f.reason]}*: {REASON_WORDS[f.reason]}\n"
        f"      {layout_text(f.layout, f.counter)} · {owner_text(f.owner)} · {_age(f)} · "
        f"TTL {ttl(f.ttl_ms)}"
    )
    said = impact_words(f.impact, f.layout)
    if said:
        line += f"\n      *{plain(said, 300)}*"
    if f.note and not f.releasable:
        line += f" · not offered: {plain(f.note, 200)}"
    if f.renewal:
        line += f"\n      {plain(f.renewal, 300)}"
    if f.cycle:
        line += f"\n      {plain(cycle_text(f.cycle, key_limit=40), 1400)} · {plain(f.note, 300)}"
    return line


def _compact(i: int, f: Finding) -> str:
    said = impact_words(f.impact, f.layout)
    return (
        f"{i}. {lock_text(f.key, f.big)} · {REASON_LABEL[f.reason]} · {_age(f)} · "
        f"TTL {ttl(f.ttl_ms)} · {layout_text(f.layout, f.counter)} · {owner_text(f.owner)}"
        + (f" · {plain(said, 300)}" if said else "")
    )


def _more_text(used: int, total: int, kept: int) -> str:
    parts = []
    if kept > used:
        parts.append(
            f"…and {kept - used:,} more flagged "
            f"{'lock' if kept - used == 1 else 'locks'}: listed in the thread."
        )
    if total > kept:
        parts.append(
            f"{total - kept:,} more not listed (this scan keeps the worst {kept:,}; "
            "`lockguard scan --limit N` shows more)."
        )
    return " ".join(parts)


def _replies(flagged: list[Finding], start: int, total: int, endpoint: str) -> list[Message]:
    out: list[Message] = []
    while start < len(flagged):
        lead = context(
            f"Flagged locks {start + 1:,} to {len(flagged):,} of {total:,} on "
            f"{code(endpoint)}, worst first"
        )
        room = BUDGET - kit.blocks_size([lead]) - 50
        body, used = pack(
            (_compact(i, f) for i, f in enumerate(flagged[start:], start + 1)),
            budget=room,
            max_blocks=kit.MESSAGE_BLOCKS - 1,
        )
        if not used:  # cannot happen: every line is far below the limits
            raise ValueError("a flagged lock's line does not fit in a Slack message")
        lead = context(
            f"Flagged locks {start + 1:,} to {start + used:,} of {total:,} on "
            f"{code(endpoint)}, worst first"
        )
        out.append(
            message(
                f"lockguard: flagged locks {start + 1:,} to {start + used:,} of {total:,}",
                [lead, *body],
            )
        )
        start += used
    return out


def _case_text(result: ScanResult, case: Case | None, dry_run: bool, auto_remediate: bool) -> str:
    proposal = result.proposal
    others = int(str(proposal.get("already_in_a_live_case", 0) or 0))
    snoozed = int(str(proposal.get("snoozed_after_rejection", 0) or 0))
    renewing = result.by_reason.get(Reason.LONG_HELD_RENEWING, 0)
    over = int(str(proposal.get("over_limit", 0) or 0))
    notes = []
    if over:
        notes.append(
            f"{count(over, 'releasable lock')} past the {CASE_LIMIT:,} one case holds "
            "(the next scan's case offers them)"
        )
    if others:
        notes.append(f"{count(others, 'lock')} already in another open case")
    if snoozed:
        notes.append(f"{count(snoozed, 'lock')} rejected recently (not offered again yet)")
    if renewing:
        notes.append(
            f"{count(renewing, 'lock')} still renewed by "
            f"{'its owner' if renewing == 1 else 'their owners'} (never offered)"
        )
    tail = f" Not in it: {'; '.join(notes)}." if notes else ""
    if case is None:
        if not auto_remediate:
            return (
                "*No case opened*: auto-remediation is off (`LOCKGUARD_AUTO_REMEDIATE="
                "false`), so nothing is released from this message."
            )
        return "*No case opened*: nothing new to release." + tail
    n = case.total_locks
    if case.state is not State.PENDING:
        return f"*Case {code(case.id)}* is {case.state.value}.{tail}"
    if dry_run:
        what = (
            f"approving in dry run releases nothing; {count(n, 'lock')} would be "
            "released (each only if the holder shown still holds it)"
        )
    else:
        what = (
            f"approving releases *{count(n, 'lock')}*, each only if the holder shown still holds it"
        )
    return f"*Case {code(case.id)}*: {what}. Expires {date(case.expires_ms)}.{tail}"


def with_target(post: FindingsPost, target: str | None) -> FindingsPost:
    """`post` with its buttons naming the case's `target`: a click reaches its Redis alone."""
    if not target:
        return post
    tagged = ids.decision_block(target)
    blocks = [
        {**b, "block_id": tagged} if b.get("block_id") == ids.DECISION_BLOCK else b
        for b in post.message.get("blocks") or []
    ]
    return replace(post, message={**post.message, "blocks": blocks})


def decision_buttons(
    case: Case, dry_run: bool, typed_above: int | None = None, *, approvable: bool = True
) -> Block:
    """Approve (with a confirm dialog, or above `typed_above` locks none: its click opens the
    typed-count modal) and Reject, each carrying only the case id."""
    reject = button(
        "Reject (dry run)" if dry_run else "Reject", ids.REJECT, case.id, style="danger"
    )
    if not approvable:
        return actions(ids.DECISION_BLOCK, reject)
    n = case.total_locks
    dialog: dict[str, Any] | None
    if typed_above is not None and n > typed_above:
        dialog = None
    elif dry_run:
        dialog = confirm(
            "Approve in dry run?",
            f"Dry run: the approval of case {case.id} is recorded; none of its "
            f"{count(n, 'lock')} is touched.",
            "Approve (dry run)",
        )
    else:
        dialog = confirm(
            f"Release {count(n, 'lock')}?",
            f"lockguard deletes the {count(n, 'lock')} of case {case.id}, each only "
            "if the holder shown still holds it, and announces each release.",
            "Release",
        )
    return actions(
        ids.DECISION_BLOCK,
        button(
            "Approve (dry run)" if dry_run else "Approve",
            ids.APPROVE,
            case.id,
            style="primary",
            confirm_with=dialog,
        ),
        reject,
    )
