"""The bot's Home tab (`app_home_opened` → `views.publish`): the lock inventory at a glance.

Counts by verdict and layout, the age histogram, the oldest locks (healthy ones too), the open
cases with their state, silence watches, and the guard's own health with the next scheduled
scan. Built from the same pieces as the digest (`bot.slack.blocks.digest`), and within
`limits.check_view` (100 blocks, the same text limits) whatever the input's size. A Home tab
notifies nobody, so deciders are shown as mentions (Slack renders their names).
"""

from __future__ import annotations

from typing import Any

from bot.cases.case import Case, State
from bot.core.display import duration
from bot.slack.blocks import limits
from bot.slack.blocks.digest import (
    GuardHealth,
    Listing,
    case_state,
    fit,
    head_blocks,
    health_blocks,
    inventory,
    oldest_lines,
    outcomes_text,
    watch_lines,
)
from bot.slack.blocks.kit import BUDGET, context, divider
from bot.slack.blocks.text import code, count, cut, date, mention

#: The cases the Home tab lists: those still to be decided or finished.
OPEN_STATES = (State.INCOMPLETE, State.PENDING, State.APPROVED)
#: Blocks the listings may use between them (a Home tab allows 100; the JSON budget binds first).
_LISTING_BLOCKS = 60


def _case_line(case: Case, now_ms: int) -> str:
    state = case.effective_state(now_ms)
    line = (
        f"{code(cut(case.id, 40))} · *{case_state(case, now_ms)}* · "
        f"{count(case.lock_count or len(case.locks), 'lock')} · opened {date(case.created_ms)}"
    )
    if state is State.PENDING:
        line += (
            f" · expires {date(case.expires_ms)} "
            f"(in {duration(max(case.expires_ms - now_ms, 0) / 1000)})"
        )
        if case.approvals:
            line += " · approved so far by " + ", ".join(
                mention(who) for who, _ in case.approvals[:5]
            )
    elif case.decided_by:
        line += f" · approved by {mention(case.decided_by)}"
        if case.decided_ms:
            line += f" at {date(case.decided_ms)}"
    if case.outcome_counts:
        line += "\n      " + outcomes_text(case.outcome_counts)
    if state is State.INCOMPLETE:
        line += (
            f"\n      {code(f'lockguard approve {cut(case.id, 40)} --by NAME --resume')} "
            "retries the locks that errored"
        )
    return line


def home_view(
    last_scan: dict[str, Any] | None,
    cases: list[Case],
    health: GuardHealth,
    *,
    endpoint: str,
    now_ms: int,
) -> dict[str, Any]:
    """The Home tab view: `{"type": "home", "blocks": [...]}` for `views.publish`."""
    inv = inventory(last_scan)
    blocks = head_blocks(
        inv, health, endpoint=endpoint, now_ms=now_ms, title=f"lockguard on {endpoint}"
    )
    tail = [
        *health_blocks(health, now_ms=now_ms),
        context(f"Redis {code(endpoint)} · updated {date(now_ms)}"),
    ]

    live = sorted(
        (c for c in cases if c.effective_state(now_ms) in OPEN_STATES and not c.dry_run),
        key=lambda c: (OPEN_STATES.index(c.effective_state(now_ms)), -c.created_ms),
    )
    items = [  # each weight is its share of the room against the others
        Listing(
            "*Open cases*: " + count(len(live), "case"),
            [_case_line(c, now_ms) for c in live[:200]],
            "open case",
            hint="`/lockguard cases`",
            weight=3,
            total=len(live),
            empty="*Open cases*: none. Nothing waits for a decision.",
        ),
        Listing(
            "*Oldest locks* at the last scan, healthy ones included",
            oldest_lines(inv) if inv is not None else [],
            "lock",
            weight=5,
            empty="*Oldest locks*: none, no locks were seen." if inv else "",
        ),
        Listing(
            "*Silence watches*",
            watch_lines(health.watches),
            "watch",
            "watches",
            "`/lockguard status`",
            weight=2,
            empty="No silence watches configured (`LOCKGUARD_WATCHES`).",
        ),
    ]
    room = BUDGET - limits.blocks_size(blocks + tail) - 3 * limits.blocks_size([divider()]) - 8
    open_cases, oldest, watches = fit(items, budget=room, max_blocks=_LISTING_BLOCKS)
    for part in (oldest, open_cases, watches):
        if part:
            blocks += [divider(), *part]
    return {"type": "home", "blocks": blocks + tail}
