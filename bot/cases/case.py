"""The case record (pure): its states, each lock exactly as shown to the approver, its id and
its outcome records; `bot.cases.case_store` stores and changes them."""

from __future__ import annotations

import enum
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from bot.core.clock import day_utc
from bot.core.display import escape, key_json
from bot.core.errors import CaseError
from bot.core.model import BigKey, Finding, Layout, Reason

CASE_ID = re.compile(r"LG-\d{6}-[0-9a-f]{6}")
#: A lock's renewal sentence as a case keeps it, in characters.
RENEWAL_TEXT = 300


class State(enum.StrEnum):
    OPENING = "opening"
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    RELEASED = "released"
    INCOMPLETE = "incomplete"


@dataclass(frozen=True, slots=True)
class CaseLock:
    """One lock as shown to the approver: exact bytes and the evidence."""

    key: bytes
    layout: Layout
    identity: bytes
    reason: Reason
    ttl_ms: int
    observed_ms: int
    held_seconds: float
    owner: str = ""
    counter: int | None = None
    type: str = "string"
    #: A `deadlock`'s wait-for cycle as shown, (lock key, holder field) in order: the release
    #: goes ahead only while it still holds (`bot.cases.recheck`). Empty for other reasons.
    cycle: tuple[tuple[bytes, bytes], ...] = ()
    renewal: str = ""
    #: An oversized key as shown (sha256 included): `key` is then its `BigKey.name`, and the
    #: release finds the exact bytes again (`bot.scan.oversized`).
    big: BigKey | None = None

    @classmethod
    def from_finding(cls, f: Finding) -> CaseLock:
        return cls(
            key=f.key,
            layout=f.layout,
            identity=f.identity,
            reason=f.reason,
            ttl_ms=f.ttl_ms,
            observed_ms=f.observed_ms,
            held_seconds=f.held_seconds,
            owner=f.owner,
            counter=f.counter,
            type=f.type,
            cycle=f.cycle,
            renewal=f.renewal[:RENEWAL_TEXT],
            big=f.big,
        )

    def to_json(self) -> dict[str, Any]:
        cycle = {"cycle": [[k.hex(), h.hex()] for k, h in self.cycle]} if self.cycle else {}
        return {
            **key_json(self.key, self.big),
            "layout": self.layout.value,
            "identity_hex": self.identity.hex(),
            "reason": self.reason.value,
            "ttl_ms": self.ttl_ms,
            "observed_ms": self.observed_ms,
            "held_seconds": round(self.held_seconds, 3),
            "owner": self.owner,
            "counter": self.counter,
            "type": self.type,
            **cycle,
            **({"renewal": self.renewal} if self.renewal else {}),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CaseLock:
        counter = d.get("counter")
        big = _big(d) if "key_bytes" in d else None
        return cls(
            key=big.name if big is not None else bytes.fromhex(d["key_hex"]),
            layout=Layout(d["layout"]),
            identity=bytes.fromhex(d["identity_hex"]),
            reason=Reason(d["reason"]),
            ttl_ms=int(d["ttl_ms"]),
            observed_ms=int(d["observed_ms"]),
            held_seconds=float(d["held_seconds"]),
            owner=str(d.get("owner", "")),
            counter=int(counter) if counter is not None else None,
            type=str(d.get("type", "string")),
            cycle=tuple((bytes.fromhex(k), bytes.fromhex(h)) for k, h in d.get("cycle", ())),
            renewal=str(d.get("renewal", ""))[:RENEWAL_TEXT],
            big=big,
        )


def _big(d: dict[str, Any]) -> BigKey:
    return BigKey(
        bytes.fromhex(d["key_head_hex"]),
        bytes.fromhex(d["key_tail_hex"]),
        int(d["key_bytes"]),
        str(d.get("key_sha256", "")),
    )


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    state: State
    created_ms: int
    expires_ms: int
    locks: tuple[CaseLock, ...]  # the first PREVIEW locks, in order (all of a small case)
    lock_count: int = 0
    decided_by: str = ""
    decided_ms: int | None = None
    decision_reason: str = ""
    outcomes: tuple[dict[str, Any], ...] = field(default=())  # those of `locks`, in order
    outcome_counts: dict[str, int] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    dry_run: bool = False
    #: Approvals recorded so far, (approver, server ms), in order.
    approvals: tuple[tuple[str, int], ...] = ()

    def effective_state(self, now_ms: int) -> State:
        if self.state is State.PENDING and now_ms >= self.expires_ms:
            return State.EXPIRED
        return self.state

    @property
    def total_locks(self) -> int:
        return self.lock_count or len(self.locks)

    @property
    def nothing_released(self) -> bool:
        """A closed release in which no lock was released (every one skipped, recovered or
        already gone): it must not read "Released"."""
        return (
            self.state is State.RELEASED
            and not self.dry_run
            and not self.outcome_counts.get("released", 0)
        )

    def state_text(self, now_ms: int) -> str:
        if self.nothing_released:
            return "closed, nothing released"
        return self.effective_state(now_ms).value


def new_case_id(now_ms: int) -> str:
    return f"LG-{day_utc(now_ms)}-{secrets.token_hex(3)}"


def check_case_id(text: str) -> str:
    """`text` as a case id, typed in any case (`lg-...`, `...-F6E01A`), or CaseError."""
    case_id = text.strip()
    if len(case_id) == 16 and case_id[:3].upper() == "LG-":
        case_id = "LG-" + case_id[3:].lower()
    if not CASE_ID.fullmatch(case_id):
        raise CaseError(
            f"malformed case id {escape(case_id.encode(), 40)!r}: expected LG-YYMMDD-xxxxxx "
            "(as shown by `lockguard cases`)"
        )
    return case_id


def parse_outcome(raw: bytes) -> dict[str, Any]:
    """An outcome record (`<outcome>\n<JSON>`) as a dict with at least `outcome`."""
    name, _, body = raw.partition(b"\n")
    try:
        data = json.loads(body) if body else {}
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    data["outcome"] = name.decode("utf-8", "replace")
    return data


def case_from_hash(raw: dict[bytes, bytes], locks: list[bytes], outs: list[bytes | None]) -> Case:
    def text(name: str, default: str = "") -> str:
        v = raw.get(name.encode())
        return v.decode("utf-8", "replace") if v is not None else default

    decided = text("decided_ms")
    shown = tuple(CaseLock.from_json(json.loads(r)) for r in locks)
    counts = {k[2:].decode(): int(v) for k, v in raw.items() if k.startswith(b"n_") and int(v) > 0}
    return Case(
        id=text("id"),
        state=State(text("state")),
        created_ms=int(text("created_ms", "0")),
        expires_ms=int(text("expires_ms", "0")),
        locks=shown,
        lock_count=int(text("lock_count", "0")),
        decided_by=text("decided_by"),
        decided_ms=int(decided) if decided else None,
        decision_reason=text("decision_reason"),
        outcomes=tuple(
            {**parse_outcome(o), "key_hex": lock.key.hex()}
            for lock, o in zip(shown, outs, strict=False)
            if o is not None
        ),
        outcome_counts=counts,
        summary=json.loads(text("summary", "{}") or "{}"),
        dry_run=text("dry_run") == "1",
        approvals=tuple(_approval(line) for line in text("approvals").splitlines() if line),
    )


def _approval(line: str) -> tuple[str, int]:
    ms, _, who = line.partition(" ")
    return who, int(ms) if ms.isdigit() else 0
