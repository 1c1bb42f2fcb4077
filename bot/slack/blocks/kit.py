"""Block Kit pieces as plain dicts, and `pack`: as many lines as fit in sections within a budget.

Every mrkdwn text object is `verbatim` (Slack does not link-ify or mention-ify bare text), and
every plain_text object is cut to its limit here, so a builder cannot overrun one by accident.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from bot.slack.blocks import limits
from bot.slack.blocks.text import cut

Block = dict[str, Any]
Message = dict[str, Any]

#: Room kept free under the cumulative limit, for Slack's own accounting.
MARGIN = 500
#: The cumulative budget builders fill up to (`limits.BLOCKS_JSON` less the margin).
BUDGET = limits.BLOCKS_JSON - MARGIN
#: Longest section text a builder makes (a little under Slack's limit).
SECTION_TEXT = limits.SECTION_TEXT - 100


def md(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": cut(text, limit), "emoji": True}


def header(text: str) -> Block:
    return {"type": "header", "text": plain(text, limits.HEADER_TEXT)}


def section(text: str, *, block_id: str | None = None) -> Block:
    block: Block = {"type": "section", "text": md(text)}
    if block_id:
        block["block_id"] = block_id
    return block


def fields(*items: str) -> Block:
    return {"type": "section", "fields": [md(i) for i in items[: limits.SECTION_FIELDS]]}


def context(*texts: str) -> Block:
    return {"type": "context", "elements": [md(t) for t in texts[: limits.CONTEXT_ELEMENTS]]}


def divider() -> Block:
    return {"type": "divider"}


def confirm(title: str, text: str, ok: str, deny: str = "Cancel") -> dict[str, Any]:
    return {
        "title": plain(title, limits.CONFIRM_TITLE),
        "text": plain(text, limits.CONFIRM_TEXT),
        "confirm": plain(ok, limits.CONFIRM_BUTTON),
        "deny": plain(deny, limits.CONFIRM_BUTTON),
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
        "text": plain(text, limits.BUTTON_TEXT),
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
    return {"text": cut(text, limits.MESSAGE_TEXT), "blocks": blocks}


def _json_len(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False)) - 2


#: The JSON of a section block around its text, plus the comma before the next block.
_SECTION_COST = len(json.dumps(section(""), separators=(",", ":"), ensure_ascii=False)) + 1


def pack(
    lines: Iterable[str], *, budget: int, max_blocks: int, limit: int = SECTION_TEXT
) -> tuple[list[Block], int]:
    """Sections holding the leading `lines` (each at most `limit` characters), one line each
    and as many a section as fit, within `budget` characters of JSON and `max_blocks` blocks.
    Returns the sections and how many lines they hold."""
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
