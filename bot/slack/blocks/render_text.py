"""Block Kit as plain text for a terminal (`lockguard demo`): what a person reads in Slack,
without the styling. Tokens become what Slack shows (`<@U123>` as `@name` from `users`); inside
code only the entities are undone, so Redis content (`\\xHH` escapes and all) prints as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

DIVIDER = "-" * 60
_CODE = re.compile(r"```(.*?)```|`([^`\n]+)`", re.S)
_TOKEN = re.compile(r"<([^<>\n]+)>")
_SLOT = re.compile("\x00(\\d+)\x00")
_STYLES = [
    re.compile(rf"(?<![\w{m}]){m}(?=\S)(.+?)(?<=\S){m}(?![\w{m}])") for m in (r"\*", "_", "~")
]


def unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _token(inner: str, users: Mapping[str, str]) -> str:
    target, _, label = inner.partition("|")
    if target.startswith("@"):
        user = target[1:]
        return "@" + (users.get(user) or label or user)
    if target.startswith("#"):
        return "#" + (label or target[1:])
    if target.startswith("!subteam^"):
        return label or "@" + target[len("!subteam^") :]
    if target.startswith("!date^"):
        return label or target
    if target.startswith("!"):
        return "@" + target[1:]
    return f"{label} ({target})" if label and label != target else target


def mrkdwn_to_text(text: str, users: Mapping[str, str] | None = None) -> str:
    users = users or {}
    held: list[str] = []

    def hold(shown: str) -> str:
        held.append(shown)
        return f"\x00{len(held) - 1}\x00"

    out = text.replace("\x00", "\\x00")  # NUL marks our slots below; shown as `\x00`
    out = _CODE.sub(
        lambda m: hold(unescape(m.group(1) if m.group(1) is not None else m.group(2)).strip("\n")),
        out,
    )
    out = _TOKEN.sub(lambda m: hold(unescape(_token(m.group(1), users))), out)
    for style in _STYLES:
        out = style.sub(r"\1", out)
    out = unescape(out)
    while _SLOT.search(out):  # a token's label may hold a code slot: restore until none is left
        out = _SLOT.sub(lambda m: held[int(m.group(1))], out)
    return out


def text_of(obj: Any, users: Mapping[str, str] | None = None) -> str:
    if not isinstance(obj, Mapping):
        return ""
    text = str(obj.get("text") or "")
    return mrkdwn_to_text(text, users) if obj.get("type") == "mrkdwn" else text


def element_text(el: Any, users: Mapping[str, str] | None = None) -> str:
    if not isinstance(el, Mapping):
        return ""
    kind = el.get("type")
    if kind in ("mrkdwn", "plain_text"):
        return text_of(el, users)
    if kind == "image":
        return f"[image: {el.get('alt_text') or ''}]"
    if kind == "button":
        return f"[ {text_of(el.get('text'), users)} ]"
    label = text_of(el.get("placeholder"), users) or text_of(el.get("text"), users)
    if kind in (
        "static_select",
        "external_select",
        "users_select",
        "conversations_select",
        "channels_select",
        "multi_static_select",
        "overflow",
    ):
        return f"[ {label or '...'} v ]"
    return f"[ {label or kind or 'element'} ]"


def _rich_words(node: Any) -> str:
    if isinstance(node, Mapping):
        if "text" in node and isinstance(node["text"], str):
            return node["text"]
        if node.get("type") == "user":
            return "@" + str(node.get("user_id") or "")
        if node.get("type") == "link":
            return str(node.get("url") or "")
        return "".join(_rich_words(n) for n in node.get("elements") or [])
    return ""


def block_lines(block: Mapping[str, Any], users: Mapping[str, str] | None = None) -> list[str]:
    kind = block.get("type")
    if kind == "header":
        title = text_of(block.get("text"), users)
        return [title, "=" * len(title)]
    if kind == "section":
        lines = text_of(block.get("text"), users).splitlines()
        for field in block.get("fields") or []:  # "*Label*\nvalue" reads "Label: value"
            label, *value = text_of(field, users).splitlines() or [""]
            lines.append(f"{label}: {' '.join(value)}" if value else label)
        accessory = block.get("accessory")
        if accessory is not None:
            lines.append(element_text(accessory, users))
        return lines
    if kind == "context":
        parts = (element_text(el, users) for el in block.get("elements") or [])
        return [" | ".join(" ".join(p.splitlines()) for p in parts if p)]
    if kind == "actions":
        return ["  ".join(element_text(el, users) for el in block.get("elements") or [])]
    if kind == "divider":
        return [DIVIDER]
    if kind == "image":
        return [f"[image: {block.get('alt_text') or ''}]"]
    if kind == "input":
        return [f"{text_of(block.get('label'), users)}: [ ______ ]"]
    if kind == "rich_text":
        return _rich_words(block).splitlines()
    return []


def render_blocks(
    blocks: Iterable[Mapping[str, Any]], users: Mapping[str, str] | None = None
) -> str:
    lines: list[str] = []
    for block in blocks:
        lines.extend(block_lines(block, users))
    return "\n".join(line.rstrip() for line in lines)


def render_message(message: Mapping[str, Any], users: Mapping[str, str] | None = None) -> str:
    """A message's blocks as text; its `text` (mrkdwn) when it has no blocks."""
    blocks = message.get("blocks")
    if isinstance(blocks, list) and blocks:
        return render_blocks(blocks, users)
    return mrkdwn_to_text(str(message.get("text") or ""), users)
