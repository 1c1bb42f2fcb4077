"""The audit log: the Redis stream `{lockguard}:audit`, "who released what, when and why".

One entry per scan summary, case opened, decision, per-lock release and case closed; entries past
the retention are trimmed on every append (`XADD MINID ~`), so no separate job is needed. Fields
(strings): `event`, `at_ms` (server time), `case_id`, `actor`, `data` (JSON; lock keys as
`key_ref` names them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

import redis
from redis.typing import EncodableT, FieldT

from bot.store.keyspace import AUDIT_STREAM

EVENTS = ("scan", "case_opened", "decision", "release", "case_closed")


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
