"""The bot's Home tab (`app_home_opened` → `views.publish`): the lock inventory at a glance, the
open cases and the guard's own health, from the same pieces as the digest. A Home tab notifies
nobody, so deciders are shown as mentions (Slack renders their names).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.cases.case import Case, State
from bot.core.display import duration
from bot.slack.blocks import kit
from bot.slack.blocks.case_message import case_line
from bot.slack.blocks.guard import GuardHealth, head_blocks, health_blocks, watch_listing
from bot.slack.blocks.inventory import (
    Inventory,
    inventory,
    oldest_listing,
    verdict_line,
    worst_listing,
)
from bot.slack.blocks.kit import BUDGET, Block, Listing, context, fit, header, section
from bot.slack.blocks.text import code, count, date, plain, redis_text

#: The cases the Home tab lists: those still to be decided or finished.
OPEN_STATES = (State.INCOMPLETE, State.PENDING, State.APPROVED)
#: Blocks the listings may use between them (a Home tab allows 100; the JSON budget binds first).
_LISTING_BLOCKS = 60
#: Targets a fleet's Home tab shows at most, worst first (one section each); the rest counted.
MAX_TARGETS = 40


def home_view(
    last_scan: dict[str, Any] | None,
    cases: list[Case],
    health: GuardHealth,
    *,
    endpoint: str,
    now_ms: int,
) -> dict[str, Any]:
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
        worst_listing(inv),
        Listing(
            "*Open cases*: " + count(len(live), "case"),
            [case_line(c, now_ms, live=True) for c in live[:200]],
            "open case",
            hint="`/lockguard cases`",
            weight=3,
            total=len(live),
            empty="*Open cases*: none. Nothing waits for a decision.",
        ),
        oldest_listing(inv),
        watch_listing(health.watches),
    ]
    room = BUDGET - kit.blocks_size(blocks + tail)
    # shown: the worst, the oldest, the open cases, the watches
    blocks += fit(items, order=(0, 2, 1, 3), budget=room, max_blocks=_LISTING_BLOCKS)
    return {"type": "home", "blocks": blocks + tail}


@dataclass(frozen=True, slots=True)
class TargetHome:
    name: str
    labels: str  # `team=payments, env=prod`
    endpoint: str
    last_scan: dict[str, Any] | None = None
    open_cases: int = 0
    problem: str = ""  # its Redis did not answer: why, in lockguard's words

    def rank(self) -> tuple[int, int, int, str]:
        """Worst first: down, then the most flagged locks, then the most open cases."""
        inv = inventory(self.last_scan)
        return (0 if self.problem else 1, -(inv.flagged if inv else 0), -self.open_cases, self.name)


def fleet_home_view(targets: Sequence[TargetHome], *, now_ms: int) -> dict[str, Any]:
    """One section per target, worst first, at most MAX_TARGETS; the rest are counted."""
    blocks: list[Block] = [header(f"lockguard on {count(len(targets), 'target')}")]
    ranked = sorted(targets, key=TargetHome.rank)
    room = BUDGET - 1200
    shown = 0
    for t in ranked[:MAX_TARGETS]:
        block = section(_target_text(t, inventory(t.last_scan)))
        if kit.blocks_size([*blocks, block]) > room:
            break
        blocks.append(block)
        shown += 1
    if len(ranked) > shown:
        blocks.append(
            context(f"…and {count(len(ranked) - shown, 'more target')}: `/lockguard status`")
        )
    blocks.append(
        context(f"Every target's open cases: `/lockguard cases` · updated {date(now_ms)}")
    )
    return {"type": "home", "blocks": blocks}


def _target_text(t: TargetHome, inv: Inventory | None) -> str:
    labels = f" ({plain(t.labels, 200)})" if t.labels else ""
    head = f"*{redis_text(t.name, 40)}*{labels} · {code(t.endpoint[:200])}"
    if t.problem:
        return f"{head}\n:red_circle: its Redis did not answer: {plain(t.problem, 300)}"
    if inv is None:
        scan = "no scan completed yet"
    else:
        scan = (
            f"{count(inv.flagged, 'lock')} flagged of {inv.locks:,} · oldest held "
            f"{duration(inv.oldest_held)} · last scan {date(inv.server_time_ms)}\n"
            f"{verdict_line(inv)[:600]}"
        )
    return f"{head}\n{scan}\n*Open cases*: {t.open_cases:,}"
