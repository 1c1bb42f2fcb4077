"""Every Slack message lockguard sends, in one place for the listeners and the scheduler.

The findings and case messages live in `findings` and `case_message` (re-exported here); this
module has the small ones: status, cases, help, alerts, and the texts of ephemeral refusals.
Each builder returns `{"text": fallback, "blocks": [...]}` within `limits.check_message`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.cases.case import Case, State
from bot.core.display import duration
from bot.slack.blocks.case_message import (
    case_line,
    case_message,
    reject_errors,
    reject_modal,
    reject_submission,
    state_word,
)
from bot.slack.blocks.findings import (
    FindingsPost,
    decision_buttons,
    findings_message,
    healthy_message,
)
from bot.slack.blocks.guard import GuardSnapshot, schedule_blocks
from bot.slack.blocks.kit import (
    BUDGET,
    MESSAGE_BLOCKS,
    Block,
    Message,
    blocks_size,
    context,
    fields,
    header,
    message,
    pack,
    section,
)
from bot.slack.blocks.text import (
    OWNER_LIMIT,
    code,
    count,
    date,
    is_group_id,
    is_user_id,
    mention,
    plain,
    redis_text,
)
from bot.store.scans import HEARTBEAT_MS

if TYPE_CHECKING:
    from bot.engine import Status

__all__ = [
    "FindingsPost",
    "alert_message",
    "already_decided_text",
    "approvers_note",
    "case_message",
    "cases_message",
    "decision_buttons",
    "findings_message",
    "healthy_message",
    "help_message",
    "is_open",
    "not_approver_text",
    "refusal_text",
    "reject_errors",
    "reject_modal",
    "reject_submission",
    "same_approver_text",
    "state_word",
    "status_message",
    "unknown_case_text",
    "unlisted_text",
]

#: Cases still to be finished: shown by `/lockguard status`.
_OPEN = (State.OPENING, State.PENDING, State.APPROVED, State.INCOMPLETE)


def is_open(case: Case, now_ms: int) -> bool:
    """Still to be decided or finished. A dry-run approval is final (nothing is left to
    release), so it is not open: it is approved."""
    state = case.effective_state(now_ms)
    return state in _OPEN and not (state is State.APPROVED and case.dry_run)


def _approved_dry_run(case: Case, now_ms: int) -> bool:
    return case.effective_state(now_ms) is State.APPROVED and case.dry_run


def approvers_note(
    users: Sequence[str] = (), group: str = "", required: int = 1, *, notify: bool = True
) -> str:
    """Who may decide, as mrkdwn for `findings_message`. With `notify` the approvers are
    mentioned (Slack notifies them); without, their ids are shown as code."""

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


def status_message(
    status: Status, cases: list[Case], *, now_ms: int, guard: GuardSnapshot | None = None
) -> Message:
    """`/lockguard status`: Redis, the last scan, the scheduler heartbeat, open cases; with
    `guard`, the next scheduled scan and digest, which replica runs them, late watches."""
    last = status.last_scan or {}
    if last:
        when = int(str(last.get("server_time_ms", 0) or 0))
        scan = (
            f"{date(when) if when else 'time unknown'}: "
            f"{int(str(last.get('scanned', 0))):,} keys, "
            f"{int(str(last.get('finding_count', 0))):,} flagged, oldest held "
            f"{duration(float(str(last.get('oldest_held_seconds', 0))))}"
        )
    else:
        scan = "none recorded yet"
    beat = (
        f"a scan completed in the last {duration(HEARTBEAT_MS / 1000)}"
        if status.heartbeat_alive
        else f"no scan completed in the last {duration(HEARTBEAT_MS / 1000)}"
    )
    blocks: list[Block] = [
        header("lockguard status"),
        # the version is what the server's INFO says: Redis content, escaped and cut like a key
        fields(
            f"*Redis*\n{code(status.endpoint)} "
            f"(version {redis_text(status.redis_version, OWNER_LIMIT)})",
            f"*Server time*\n{date(status.server_time_ms)}",
            f"*Last scan*\n{scan}",
            f"*Heartbeat*\n{beat}",
        ),
    ]
    if guard is not None:
        blocks += schedule_blocks(guard, now_ms)
    live = [c for c in cases if is_open(c, now_ms)]
    head = section(f"*Open cases*: {len(live):,}" if live else "*Open cases*: none")
    dry = sum(1 for c in cases if _approved_dry_run(c, now_ms))
    tail = [
        section(
            f"*Approved (dry run)*: {count(dry, 'recent case')}, closed with nothing "
            "released; a new scan offers their locks again (`/lockguard cases`)"
        )
    ][: 1 if dry else 0]
    lines = (case_line(c, now_ms) for c in live)
    body, used = pack(
        lines,
        budget=BUDGET - blocks_size([*blocks, head, *tail]) - 300,
        max_blocks=MESSAGE_BLOCKS - len(blocks) - len(tail) - 2,
    )
    blocks += [head, *body]
    if len(live) > used:
        blocks.append(context(f"…and {len(live) - used:,} more: `/lockguard cases`"))
    blocks += tail
    return message(f"lockguard status: {status.endpoint}, {count(len(live), 'open case')}", blocks)


def cases_message(cases: list[Case], *, now_ms: int) -> Message:
    """`/lockguard cases`: the recent cases, newest first, and what became of them."""
    blocks: list[Block] = [header("lockguard cases")]
    if not cases:
        blocks.append(section("No cases in the retention period."))
        return message("lockguard: no cases", blocks)
    body, used = pack(
        (case_line(c, now_ms) for c in cases),
        budget=BUDGET - blocks_size(blocks) - 300,
        max_blocks=MESSAGE_BLOCKS - 2,
    )
    blocks += body
    if len(cases) > used:
        blocks.append(context(f"…and {len(cases) - used:,} more: `lockguard cases --json`"))
    return message(f"lockguard: {count(len(cases), 'recent case')}", blocks)


def unlisted_text(case_id: str) -> str:
    """An Approve click on a case whose locks are not all shown yet (its thread)."""
    return (
        f"Nothing was approved: not every lock of case {code(case_id[:40])} is shown yet. "
        "Its thread lists them; click Approve again once it has. If the message says Slack "
        "did not take the whole thread, reject the case or let it expire."
    )


def help_message() -> Message:
    """`/lockguard help` (and the answer to anything it does not know)."""
    return message(
        "lockguard commands: scan [pattern], status, cases, help",
        [
            header("lockguard"),
            section(
                "Finds abandoned Redis locks and releases them when a person approves.\n"
                "`/lockguard scan [pattern]`: scan now and post the findings here; `pattern` "
                "narrows the configured patterns (e.g. `lock:billing:*`)\n"
                "`/lockguard status`: Redis, the last scan, the scheduler and open cases\n"
                "`/lockguard cases`: recent approval cases and what became of them\n"
                "`/lockguard help`: this help"
            ),
            context(
                "A findings message's Approve and Reject buttons decide its case. Nothing is "
                "released without an approval, and nothing at all in dry run."
            ),
        ],
    )


def alert_message(title: str, detail: str, *, endpoint: str) -> Message:
    """Something went wrong (Redis unreachable, a scan failed): `detail` is a clean sentence,
    never a traceback."""
    # The title is lockguard's own words, but it may carry a name from the configuration (a
    # watched key): escaped in the notification text, where Slack would render markup.
    return message(
        f"lockguard: {plain(title, 300)} ({plain(endpoint, 200)})",
        [
            header(f"lockguard: {title}"),
            section(plain(detail, 2900) or "(no detail)"),
            context(f"Redis {code(endpoint)}"),
        ],
    )


# -- ephemeral replies (mrkdwn text for `respond(text=...)`) ---------------------------------


def not_approver_text(approvers: str = "") -> str:
    """`approvers` is a note like `approvers_note(...)`, shown after the refusal."""
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


def unknown_case_text(case_id: str) -> str:
    return (
        f"No case {code(case_id[:40])}: it may have passed its retention. "
        "`/lockguard cases` lists the recent ones."
    )


def refusal_text(detail: str) -> str:
    """Any other refusal from the engine (a `LockguardError`'s clean message), escaped."""
    return f"Not done: {plain(detail, 2000)}"
