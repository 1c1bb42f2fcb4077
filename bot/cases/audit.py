"""The audit log: one Redis stream, `{lockguard}:audit`, answering "who released what, when and
why".

Every scan summary, case opened, decision (who, when, reason), per-lock release outcome and
verification is one entry. Entries older than the retention are trimmed on every append
(`XADD MINID ~`), so the stream stays bounded without a separate job.

Entry fields (all strings): `event`, `at_ms` (Redis server time), `case_id` (or empty), `actor`
(or empty), `data` (JSON with the event's details; lock keys as `bot.core.display.key_ref` names
them: escaped text and exact hex, or for a key over 16 KiB a prefix, `key_sha256` and `key_bytes`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

import redis
from redis.typing import EncodableT, FieldT

from bot.store.keyspace import AUDIT_STREAM

EVENTS = ("scan", "case_opened", "decision", "release", "verification", "case_closed")


@dataclass(frozen=True, slots=True)
class AuditEntry:
    id: str
    event: str
    at_ms: int
    case_id: str
    actor: str
    data: dict[str, Any]


def append(
    client: redis.Redis | redis.client.Pipeline,
    *,
    event: str,
    at_ms: int,
    retention_ms: int,
    case_id: str = "",
    actor: str = "",
    data: dict[str, Any] | None = None,
) -> None:
    if event not in EVENTS:
        raise ValueError(f"unknown audit event {event!r}")
    fields = {
        b"event": event.encode(),
        b"at_ms": str(at_ms).encode(),
        b"case_id": case_id.encode(),
        b"actor": actor.encode(),
        b"data": json.dumps(data or {}, separators=(",", ":"), sort_keys=True).encode(),
    }
    client.xadd(
        AUDIT_STREAM,
        cast("dict[FieldT, EncodableT]", fields),
        minid=max(0, at_ms - retention_ms),
        approximate=True,
    )


def recent(client: redis.Redis, count: int = 50, case_id: str | None = None) -> list[AuditEntry]:
    """Newest first. With `case_id`, only that case's entries (read back over the whole log)."""
    out: list[AuditEntry] = []
    last = b"+"
    while len(out) < count:
        # bytes throughout: the client never decodes
        page = cast(
            "list[tuple[bytes, dict[bytes, bytes]]]",
            client.xrevrange(AUDIT_STREAM, max=last, min=b"-", count=500),
        )
        if not page:
            break
        for entry_id, fields in page:
            if entry_id == last:
                continue
            entry = _entry(entry_id, fields)
            if case_id is None or entry.case_id == case_id:
                out.append(entry)
                if len(out) >= count:
                    break
        if len(page) < 500:
            break
        last = page[-1][0]
    return out


def _entry(entry_id: bytes, fields: dict[bytes, bytes]) -> AuditEntry:
    try:
        data = json.loads(fields.get(b"data", b"{}"))
    except ValueError:
        data = {"unreadable": True}
    return AuditEntry(
        id=entry_id.decode(),
        event=fields.get(b"event", b"").decode(),
        at_ms=int(fields.get(b"at_ms", b"0") or 0),
        case_id=fields.get(b"case_id", b"").decode(),
        actor=fields.get(b"actor", b"").decode("utf-8", "replace"),
        data=data if isinstance(data, dict) else {"value": data},
    )
