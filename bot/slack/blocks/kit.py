"""Block Kit's pieces as plain dicts, Slack's limits, and filling a message up to them.

Every mrkdwn text object is `verbatim` (Slack does not link-ify or mention-ify bare text), and
every plain_text object is cut to its limit here, so a builder cannot overrun one by accident.
`pack` puts as many lines as fit in sections within a budget; a `Listing` is a titled list, and
`fit` shares one message or view fairly between several (the digest and the Home tab).

Slack answers a message over its limits with `invalid_blocks` or `msg_blocks_too_long` and posts
nothing, so a scan with many findings would go unreported. The builders fit their output within
these limits; `check_message` and `check_view` make a mistake loud, naming the block and the limit
it breaks. Sources: python-slack-sdk's block models (`slack_sdk/models/blocks`), Slack's Block Kit
reference, and for the cumulative size (undocumented; about 12,000 characters of block text) the
Bolt maintainers' notes in slackapi/bolt-js#2509. We count the whole compact JSON of the blocks,
which is more than their text: a conservative reading.
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


# -- the pieces --------------------------------------------------------------------------------


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


# -- filling a message up to the limits --------------------------------------------------------


def blocks_size(blocks: Sequence[Mapping[str, Any]]) -> int:
    """The size counted against the cumulative limit: the blocks' compact JSON, in characters."""
    return len(json.dumps(list(blocks), separators=(",", ":"), ensure_ascii=False))


def sections(lines: Sequence[str], head: str = "", per: int = 15) -> list[Block]:
    """`lines`, `per` to a section (short lines: 15 of under 150 characters each stay well within
    a section's text), the first section's text after `head`."""
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
    return built + [[] for _ in range(len(items) - len(built))]


# -- the checks --------------------------------------------------------------------------------

_PLAIN = ("plain_text",)
_ANY_TEXT = ("plain_text", "mrkdwn")


def check_message(msg: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first limit `msg` ({"text", "blocks"}) breaks."""
    text = msg.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("message: `text` (the notification fallback) is missing or empty")
    if len(text) > MESSAGE_TEXT:
        raise ValueError(f"message: `text` is {len(text)} characters; at most {MESSAGE_TEXT}")
    blocks = msg.get("blocks", [])
    _check_blocks(blocks, MESSAGE_BLOCKS, "message")


def check_view(view: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first limit `view` (a modal or Home tab) breaks."""
    kind = view.get("type")
    if kind not in ("modal", "home"):
        raise ValueError(f"view: type {kind!r}; expected 'modal' or 'home'")
    if kind == "modal":
        _text_obj(view.get("title"), "view title", MODAL_TITLE, _PLAIN)
        for name in ("submit", "close"):
            if name in view:
                _text_obj(view[name], f"view {name}", MODAL_BUTTON, _PLAIN)
    _id(view.get("callback_id"), "view callback_id", required=False)
    meta = view.get("private_metadata", "")
    if not isinstance(meta, str) or len(meta) > PRIVATE_METADATA:
        raise ValueError(
            f"view: private_metadata must be text of at most {PRIVATE_METADATA} characters"
        )
    _check_blocks(view.get("blocks", []), VIEW_BLOCKS, "view")


def _check_blocks(blocks: Any, most: int, what: str) -> None:
    if not isinstance(blocks, list):
        raise ValueError(f"{what}: `blocks` must be a list")
    if len(blocks) > most:
        raise ValueError(f"{what}: {len(blocks)} blocks; Slack allows at most {most}")
    seen: set[str] = set()
    for i, block in enumerate(blocks):
        where = _where(i, block)
        _check_block(block, where)
        block_id = block.get("block_id")
        if block_id is not None:
            if block_id in seen:
                raise ValueError(f"{where}: block_id {block_id!r} is used twice")
            seen.add(block_id)
    size = blocks_size(blocks)
    if size > BLOCKS_JSON:
        raise ValueError(
            f"{what}: the blocks are {size} characters of JSON; at most "
            f"{BLOCKS_JSON} (Slack: msg_blocks_too_long)"
        )


def _where(i: int, block: Any) -> str:
    if not isinstance(block, Mapping):
        return f"blocks[{i}]"
    name = f"blocks[{i}] ({block.get('type', '?')}"
    if "block_id" in block:
        name += f" {block['block_id']!r}"
    return name + ")"


def _check_block(block: Any, where: str) -> None:  # noqa: C901, PLR0912 (one case per block type)
    if not isinstance(block, Mapping):
        raise ValueError(f"{where}: a block must be an object")
    _id(block.get("block_id"), f"{where} block_id", required=False)
    kind = block.get("type")
    if kind == "header":
        _text_obj(block.get("text"), f"{where} text", HEADER_TEXT, _PLAIN)
    elif kind == "section":
        _section(block, where)
    elif kind == "context":
        elements = _list(block.get("elements"), f"{where} elements", CONTEXT_ELEMENTS)
        for j, el in enumerate(elements):
            if isinstance(el, Mapping) and el.get("type") == "image":
                continue
            _text_obj(el, f"{where} elements[{j}]", TEXT_OBJECT, _ANY_TEXT)
    elif kind == "actions":
        elements = _list(block.get("elements"), f"{where} elements", ACTIONS_ELEMENTS)
        ids = [el.get("action_id") for el in elements if isinstance(el, Mapping)]
        if len([a for a in ids if a]) != len({a for a in ids if a}):
            raise ValueError(f"{where}: an action_id is used twice")
        for j, el in enumerate(elements):
            _element(el, f"{where} elements[{j}]")
    elif kind == "input":
        _text_obj(block.get("label"), f"{where} label", INPUT_LABEL, _PLAIN)
        if "hint" in block:
            _text_obj(block["hint"], f"{where} hint", INPUT_HINT, _PLAIN)
        _element(block.get("element"), f"{where} element")
    elif kind == "markdown":
        text = block.get("text")
        if not isinstance(text, str) or not text or len(text) > MARKDOWN_TEXT:
            raise ValueError(f"{where}: text must be 1 to {MARKDOWN_TEXT} characters")
    elif kind not in ("divider", "image", "rich_text"):
        raise ValueError(f"{where}: unknown block type {kind!r}")


def _section(block: Mapping[str, Any], where: str) -> None:
    if "text" not in block and "fields" not in block:
        raise ValueError(f"{where}: a section needs `text` or `fields`")
    if "text" in block:
        _text_obj(block["text"], f"{where} text", SECTION_TEXT, _ANY_TEXT)
    if "fields" in block:
        items = _list(block["fields"], f"{where} fields", SECTION_FIELDS)
        for j, f in enumerate(items):
            _text_obj(f, f"{where} fields[{j}]", FIELD_TEXT, _ANY_TEXT)
    if "accessory" in block:
        _element(block["accessory"], f"{where} accessory")


def _element(el: Any, where: str) -> None:
    if not isinstance(el, Mapping):
        raise ValueError(f"{where}: an element must be an object")
    _id(el.get("action_id"), f"{where} action_id", required=el.get("type") == "button")
    kind = el.get("type")
    if kind == "button":
        _text_obj(el.get("text"), f"{where} text", BUTTON_TEXT, _PLAIN)
        value = el.get("value", "")
        if not isinstance(value, str) or len(value) > BUTTON_VALUE:
            raise ValueError(f"{where}: value must be text of at most {BUTTON_VALUE} characters")
        url = el.get("url", "")
        if not isinstance(url, str) or len(url) > BUTTON_URL:
            raise ValueError(f"{where}: url must be text of at most {BUTTON_URL} characters")
        if el.get("style", "primary") not in ("primary", "danger"):
            raise ValueError(f"{where}: style must be 'primary' or 'danger'")
        if "confirm" in el:
            _confirm(el["confirm"], f"{where} confirm")
    elif kind == "plain_text_input":
        most = el.get("max_length", TEXT_INPUT_MAX)
        if not isinstance(most, int) or not 0 < most <= TEXT_INPUT_MAX:
            raise ValueError(f"{where}: max_length must be 1 to {TEXT_INPUT_MAX}")
        if "placeholder" in el:
            _text_obj(el["placeholder"], f"{where} placeholder", PLACEHOLDER, _PLAIN)
        initial = el.get("initial_value", "")
        if not isinstance(initial, str) or len(initial) > most:
            raise ValueError(f"{where}: initial_value is longer than max_length")
    elif not isinstance(kind, str):
        raise ValueError(f"{where}: an element needs a type")


def _confirm(c: Any, where: str) -> None:
    if not isinstance(c, Mapping):
        raise ValueError(f"{where}: must be an object")
    _text_obj(c.get("title"), f"{where} title", CONFIRM_TITLE, _PLAIN)
    _text_obj(c.get("text"), f"{where} text", CONFIRM_TEXT, _ANY_TEXT)
    _text_obj(c.get("confirm"), f"{where} confirm", CONFIRM_BUTTON, _PLAIN)
    _text_obj(c.get("deny"), f"{where} deny", CONFIRM_BUTTON, _PLAIN)


def _text_obj(obj: Any, where: str, most: int, kinds: tuple[str, ...]) -> None:
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: a text object is missing")
    if obj.get("type") not in kinds:
        raise ValueError(f"{where}: type {obj.get('type')!r}; expected {' or '.join(kinds)}")
    text = obj.get("text")
    if not isinstance(text, str) or not text:
        raise ValueError(f"{where}: text is missing or empty")
    if len(text) > most:
        raise ValueError(f"{where}: {len(text)} characters; Slack allows at most {most}")


def _list(items: Any, where: str, most: int) -> list[Any]:
    if not isinstance(items, list) or not items:
        raise ValueError(f"{where}: must be a non-empty list")
    if len(items) > most:
        raise ValueError(f"{where}: {len(items)} items; Slack allows at most {most}")
    return items


def _id(value: Any, where: str, *, required: bool) -> None:
    if value is None:
        if required:
            raise ValueError(f"{where}: missing")
        return
    if not isinstance(value, str) or not value or len(value) > ID:
        raise ValueError(f"{where}: must be 1 to {ID} characters")
