"""How the demo words what lockguard recorded, for a person reading it in a terminal: people by
the name Slack shows (`@demo-operator`), not by their Slack user id, and audit entries in full,
one field after the other, never a JSON object cut off in the middle."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.cases.audit import AuditEntry
from bot.core.clock import text_utc
from bot.demo.slack_walkthrough import USERS

#: A text field of an audit entry is shown up to this many characters (then "…").
FIELD_CHARS = 60


def person(user_id: str) -> str:
    """`@demo-operator` for the demo's Slack user id; any other actor as recorded."""
    name = USERS.get(user_id)
    return f"@{name}" if name else user_id


def people(text: str) -> str:
    """`text` with each of the demo's Slack user ids written as the name Slack shows."""
    for user_id in USERS:
        text = text.replace(user_id, person(user_id))
    return text


def _value(value: Any) -> str:
    if isinstance(value, str):
        return '"' + (value if len(value) <= FIELD_CHARS else value[: FIELD_CHARS - 1] + "…") + '"'
    return json.dumps(value)


def _field(name: str, value: Any) -> str:
    if isinstance(value, Mapping):
        small = len(value) <= 4 and not any(isinstance(v, Mapping | list) for v in value.values())
        inner = ", ".join(f"{k}={_value(v)}" for k, v in value.items())
        return f"{name}: {{{inner}}}" if small else f"{name}: {len(value)} fields"
    if isinstance(value, list | tuple):
        plural = "s" if len(value) > 1 else ""
        return f"{name}: {len(value)} item{plural}" if value else f"{name}: none"
    return f"{name}: {_value(value)}"


def audit_line(entry: AuditEntry) -> str:
    """One audit entry: when, what, the case and who, then each field of its data (lists and
    objects as their size, long text shortened inside its quotes; a key's hex left out)."""
    who = f" by {person(entry.actor)}" if entry.actor else ""
    case = f" {entry.case_id}" if entry.case_id else ""
    data = dict(entry.data)
    if "key" in data:
        data.pop("key_hex", None)  # the same key, in hex
    fields = "; ".join(_field(k, v) for k, v in sorted(data.items()))
    return f"{text_utc(entry.at_ms)}  {entry.event:<13}{case}{who}  {fields}".rstrip()


def audit_lines(entries: list[AuditEntry]) -> str:
    return "\n".join(audit_line(e) for e in entries) if entries else "audit log is empty"
