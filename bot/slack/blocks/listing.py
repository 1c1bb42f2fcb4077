"""Titled lists that share one message or view: as many lines of each as fit, fairly.

A `Listing` is a title, its lines and the words for "…and N more"; `fit` adds lines one at a
time, each to the listing with the least room per weight so far, until the next would break the
JSON budget or the block count: a listing of long lines cannot crowd out the others. The digest
and the Home tab are built this way, so any input stays within Slack's limits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.slack.blocks import limits
from bot.slack.blocks.kit import Block, context, pack, section


@dataclass(frozen=True, slots=True)
class Listing:
    """A titled list of lines for `fit`; "…and N more <noun>" counts what did not fit."""

    title: str
    lines: Sequence[str]
    noun: str  # what one line is ("lock"), plural with an "s" unless `plural` says otherwise
    plural: str = ""
    hint: str = ""  # where the rest are, e.g. "`/lockguard cases`"
    weight: int = 1  # its share of the room, against the others'
    total: int | None = None  # when `lines` are only the first of more
    empty: str = ""  # mrkdwn shown when there are no lines ("": nothing is shown)

    def show(self, n: int) -> list[Block]:
        """The title, the first `n` lines, and the count of the rest."""
        if not self.lines:
            return [context(self.empty)] if self.empty else []
        body, _ = pack(self.lines[:n], budget=10**9, max_blocks=10**6)
        left = (len(self.lines) if self.total is None else self.total) - n
        noun = self.noun if left == 1 else self.plural or self.noun + "s"
        more = [context(f"…and {left:,} more {noun}{': ' if self.hint else ''}{self.hint}")]
        return [section(self.title), *body, *(more if left > 0 else [])]


def fit(items: Sequence[Listing], *, budget: int, max_blocks: int) -> list[list[Block]]:
    """Each listing's blocks, together within `budget` characters of JSON and `max_blocks`
    blocks. Lines are added one at a time, each to the listing with the least room per weight
    so far, until no more fits: a listing of long lines cannot crowd out the others."""
    shown = [0] * len(items)
    built = [item.show(0) for item in items]
    while built and sum(map(limits.blocks_size, built)) > budget:  # cannot happen in practice
        built.pop()
    sizes = [limits.blocks_size(b) for b in built]
    open_ = {i for i in range(len(built)) if items[i].lines}
    while open_:
        i = min(open_, key=lambda k: (sizes[k] / max(items[k].weight, 1), k))
        trial = items[i].show(shown[i] + 1)
        size, blocks = sum(sizes) - sizes[i] + limits.blocks_size(trial), sum(map(len, built))
        if size > budget or blocks - len(built[i]) + len(trial) > max_blocks:
            open_.discard(i)
            continue
        shown[i], built[i], sizes[i] = shown[i] + 1, trial, limits.blocks_size(trial)
        if shown[i] == len(items[i].lines):
            open_.discard(i)
    return built + [[] for _ in range(len(items) - len(built))]
