"""Slack's Block Kit limits as a check: `check_message` and `check_view` raise ValueError naming
the first block and limit a message or view breaks. The tests run every message the app posts
and every view it opens through them (the mock Slack Web API answers `invalid_blocks` when one
fails), as Slack would refuse it. The limits are `bot.slack.blocks.kit`'s, which the builders
fill up to; sources are cited there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.slack.blocks.kit import (
    ACTIONS_ELEMENTS,
    BLOCKS_JSON,
    BUTTON_TEXT,
    BUTTON_URL,
    BUTTON_VALUE,
    CONFIRM_BUTTON,
    CONFIRM_TEXT,
    CONFIRM_TITLE,
    CONTEXT_ELEMENTS,
    FIELD_TEXT,
    HEADER_TEXT,
    ID,
    INPUT_HINT,
    INPUT_LABEL,
    MARKDOWN_TEXT,
    MESSAGE_BLOCKS,
    MESSAGE_TEXT,
    MODAL_BUTTON,
    MODAL_TITLE,
    PLACEHOLDER,
    PRIVATE_METADATA,
    SECTION_FIELDS,
    SECTION_TEXT,
    TEXT_INPUT_MAX,
    TEXT_OBJECT,
    VIEW_BLOCKS,
    blocks_size,
)

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


def _check_block(block: Any, where: str) -> None:
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
