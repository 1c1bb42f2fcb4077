"""Block Kit's pieces as plain dicts, Slack's limits, and filling a message up to them.

Slack posts nothing over its limits (`invalid_blocks`, `msg_blocks_too_long`), so a scan with
many findings would go unreported: every builder fits within them (`tests/block_kit.py` checks).
mrkdwn is `verbatim` (Slack does not link-ify bare text); plain_text is cut to its limit here.
The cumulative size is undocumented (about 12,000 characters, slackapi/bolt-js#2509); we count
the blocks' whole compact JSON, which is conservative.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.slack.blocks.text import cut

MESSAGE_BLOCKS = 50
VIEW_BLOCKS = 100
MESSAGE_TEXT = 4000
BLOCKS_JSON = 12_000
TEXT_OBJECT = 3000
SECTION_TEXT = 3000
SECTION_FIELDS = 10
FIELD_TEXT = 2000
HEADER_TEXT = 150
CONTEXT_ELEMENTS = 10
ACTIONS_ELEMENTS = 25
BUTTON_TEXT = 75
BUTTON_VALUE = 2000
BUTTON_URL = 3000
ID = 255
CONFIRM_TITLE = 100
CONFIRM_TEXT = 300
CONFIRM_BUTTON = 30
MODAL_TITLE = 24
MODAL_BUTTON = 24
PRIVATE_METADATA = 3000
INPUT_LABEL = 2000
INPUT_HINT = 2000
PLACEHOLDER = 150
TEXT_INPUT_MAX = 3000
MARKDOWN_TEXT = 12_000

Block = dict[str, Any]
Message = dict[str, Any]

#: Room kept free under the cumulative limit, for Slack's own accounting.
MARGIN = 500
#: The cumulative budget builders fill up to (`BLOCKS_JSON` less the margin).
BUDGET = BLOCKS_JSON - MARGIN


def md(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def plain_text(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": cut(text, limit), "emoji": True}


def header(text: str) -> Block:
    return {"type": "header", "text": plain_text(text, HEADER_TEXT)}


def section(text: str, *, block_id: str | None = None) -> Block:
    block: Block = {"type": "section", "text": md(text)}
    if block_id:
        block["block_id"] = block_id
    return block


def fields(*items: str) -> Block:
    return {"type": "section", "fields": [md(i) for i in items[:SECTION_FIELDS]]}


def context(*texts: str) -> Block:
    return {"type": "context", "elements": [md(t) for t in texts[:CONTEXT_ELEMENTS]]}


def divider() -> Block:
    return {"type": "divider"}


def confirm(title: str, text: str, ok: str, deny: str = "Cancel") -> dict[str, Any]:
    return {
        "title": plain_text(title, CONFIRM_TITLE),
        "text": plain_text(text, CONFIRM_TEXT),
        "confirm": plain_text(ok, CONFIRM_BUTTON),
        "deny": plain_text(deny, CONFIRM_BUTTON),
    }


def button(
    text: str,
    action_id: str,
    value: str,
    *,
    style: str | None = None,
    confirm_with: dict[str, Any] | None = None,
) -> dict[str, Any]:
    el: dict[str, Any] = {
        "type": "button",
        "text": plain_text(text, BUTTON_TEXT),
        "action_id": action_id,
        "value": value,
    }
    if style:
        el["style"] = style
    if confirm_with:
        el["confirm"] = confirm_with
    return el


def actions(block_id: str, *elements: dict[str, Any]) -> Block:
    return {"type": "actions", "block_id": block_id, "elements": list(elements)}


def message(text: str, blocks: list[Block]) -> Message:
    """A message: `text` is the notification fallback (no Redis content goes in it)."""
    return {"text": cut(text, MESSAGE_TEXT), "blocks": blocks}


def blocks_size(blocks: Sequence[Mapping[str, Any]]) -> int:
    """The size counted against the cumulative limit: the blocks' compact JSON, in characters."""
    return len(json.dumps(list(blocks), separators=(",", ":"), ensure_ascii=False))


def sections(lines: Sequence[str], head: str = "", per: int = 15) -> list[Block]:
    """Short `lines`, `per` to a section, after `head`."""
    return [
        section(("" if start else head) + "\n".join(lines[start : start + per]))
        for start in range(0, len(lines), per)
    ]


def _json_len(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False)) - 2


#: The JSON of a section block around its text, plus the comma before the next block.
_SECTION_COST = len(json.dumps(section(""), separators=(",", ":"), ensure_ascii=False)) + 1


def pack(
    lines: Iterable[str], *, budget: int, max_blocks: int, limit: int = SECTION_TEXT - 100
) -> tuple[list[Block], int]:
    """Sections holding as many leading `lines` (each cut to `limit`) as fit within `budget`
    characters of JSON and `max_blocks` blocks, and how many lines they hold."""
    out: list[Block] = []
    current: list[str] = []
    length = size = used = 0
    for line in lines:
        line = cut(line, limit)
        cost = _json_len(line)
        if current and length + 1 + len(line) <= limit:
            if size + 2 + cost > budget:  # "\n" is two characters of JSON
                break
            current.append(line)
            length += 1 + len(line)
            size += 2 + cost
        else:
            if len(out) + bool(current) >= max_blocks or size + _SECTION_COST + cost > budget:
                break
            if current:
                out.append(section("\n".join(current)))
            current, length = [line], len(line)
            size += _SECTION_COST + cost
        used += 1
    if current:
        out.append(section("\n".join(current)))
    return out, used


@dataclass(frozen=True, slots=True)
class Listing:
    """A titled list of lines for `fit`; "…and N more <noun>" counts what did not fit."""

    title: str
    lines: Sequence[str]
    noun: str  # "lock"; plural with an "s" unless `plural` is given
    plural: str = ""
    hint: str = ""  # where the rest are, e.g. "`/lockguard cases`"
    weight: int = 1  # its share of the room, against the others'
    total: int | None = None  # when `lines` are only the first of more
    empty: str = ""  # mrkdwn shown when there are no lines

    def show(self, n: int) -> list[Block]:
        if not self.lines:
            return [context(self.empty)] if self.empty else []
        body, _ = pack(self.lines[:n], budget=10**9, max_blocks=10**6)
        left = (len(self.lines) if self.total is None else self.total) - n
        noun = self.noun if left == 1 else self.plural or self.noun + "s"
        more = [context(f"…and {left:,} more {noun}{': ' if self.hint else ''}{self.hint}")]
        return [section(self.title), *body, *(more if left > 0 else [])]


def fit(
    items: Sequence[Listing], *, order: Sequence[int], budget: int, max_blocks: int
) -> list[Block]:
    """The listings within `budget` and `max_blocks`, in `order`, each after a divider. Lines go
    one at a time to the listing with the least room per weight so far, until none fits: a
    listing of long lines cannot crowd out the others."""
    budget -= len(items) * blocks_size([divider()]) + 8
    shown = [0] * len(items)
    built = [item.show(0) for item in items]
    while built and sum(map(blocks_size, built)) > budget:  # cannot happen in practice
        built.pop()
    sizes = [blocks_size(b) for b in built]
    open_ = {i for i in range(len(built)) if items[i].lines}
    while open_:
        i = min(open_, key=lambda k: (sizes[k] / max(items[k].weight, 1), k))
        trial = items[i].show(shown[i] + 1)
        size, blocks = sum(sizes) - sizes[i] + blocks_size(trial), sum(map(len, built))
        if size > budget or blocks - len(built[i]) + len(trial) > max_blocks:
            open_.discard(i)
            continue
        shown[i], built[i], sizes[i] = shown[i] + 1, trial, blocks_size(trial)
        if shown[i] == len(items[i].lines):
            open_.discard(i)
    out: list[Block] = []
    for i in order:
        if i < len(built) and built[i]:
            out += [divider(), *built[i]]
    return out
