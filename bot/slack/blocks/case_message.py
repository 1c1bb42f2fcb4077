"""The message of one case after (or waiting for) a decision, rebuilt from the case alone.

Slack's copy of a message may be stale, so `chat.update` always gets this, built from the case
as Redis holds it: its state in a clear word, who decided and when, the reject reason, and what
happened to each lock (counts cover all of the case; the lines show the preview it carries).
`case_post` is a case's message posted on its own (a pending case whose findings message Slack
did not take): when it cannot list every lock, its thread gets the case's whole list as a file
(`attach`), and its buttons work once that is there: they never offer a lock not shown.
"""

from __future__ import annotations

from typing import Any

from bot.cases.case import Case, CaseLock, State
from bot.core.display import duration, ttl
from bot.slack.blocks import kit
from bot.slack.blocks.findings import (
    DRY_RUN_NOTICE,
    UNLISTED_NOTICE,
    FindingsPost,
    attachment_name,
    decision_buttons,
)
from bot.slack.blocks.kit import BUDGET, Block, Message, context, header, message, pack, section
from bot.slack.blocks.text import (
    OUTCOME_WORDS,
    REASON_LABEL,
    STATE_WORDS,
    code,
    count,
    date,
    in_order,
    layout_text,
    lock_text,
    mention,
    outcome_words,
    plain,
)


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
    """The case's message. `approvals` are the (Slack user id, ms) approvals so far of a case
    that needs `required_approvals` distinct people; `verification` is the caller's sentence
    on what verification found. A pending case keeps its buttons (`decision_buttons`, with
    `typed_above`); any other has none."""
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
    """The case's message posted on its own; `attach` when it cannot list every lock (the
    thread then gets the case's whole list as a file)."""
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
    """The case's message and how many of its locks it lists (with `thread`, the rest are said
    to be in its thread; not `approvable`, the thread is incomplete: Reject alone)."""
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
    """While a release runs: how far it is (`Releasing… 1,200 of 3,000 locks done`)."""
    return f"*Releasing…* {done:,} of {count(total, 'lock')} done (as of {date(now_ms)})."


def _more(case: Case, unlisted: int, thread: bool) -> str:
    """Where the `unlisted` locks the message has no room for are: its thread, or the CLI."""
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
    total = case.total_locks
    return f"*Outcomes ({count(total, 'lock')})*: " + " · ".join(parts)


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
