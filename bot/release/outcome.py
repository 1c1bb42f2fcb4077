"""What a release is given (`ApprovedLock`, its case context `Recording`) and gives back
(`Result`, `Outcome`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from bot.core.model import Layout, Reason


class Outcome(enum.StrEnum):
    RELEASED = "released"
    SKIPPED_REACQUIRED = "skipped_reacquired"
    ALREADY_GONE = "already_gone"
    RECOVERED = "recovered"
    #: lockguard's own records, read again at approval, do not show it as an abandoned lock.
    SKIPPED_UNPROVEN = "skipped_unproven"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class ApprovedLock:
    """Exactly what the human approved (from the scan's Finding)."""

    key: bytes
    layout: Layout
    identity: bytes  # token; hashes: `layouts.encode_fields` of every pair; counters: <counter>
    ttl_ms: int  # PTTL seen at the scan (-1: no expiry)
    observed_ms: int  # server time (ms) of that reading
    counter: int | None = None  # counter locks: the approved count
    reason: Reason | None = None  # kept_alive_by_contenders lets a counter keep counting


@dataclass(frozen=True, slots=True)
class Recording:
    """Where the script records the outcome and what it publishes: the case's context."""

    outcomes_key: bytes
    case_key: bytes
    index: int
    channel: str = ""  # '' publishes nothing
    event_prefix: str = ""  # the event JSON up to its time fields, ending in ','
    #: On a Redis Cluster: the receipt hash in the lock's own slot (`bot.store.slots`), where the
    #: script records instead of `outcomes_key`/`case_key` (another slot); b"" on one server.
    receipt_key: bytes = b""


@dataclass(frozen=True, slots=True)
class Result:
    key: bytes
    outcome: Outcome
    detail: str  # one human sentence, no secrets
    now_ttl_ms: int | None = None  # lock-delay: the TTL the key has now
    event_published: bool = False
    wake: tuple[str, ...] = ()
    #: Decided by an earlier run: its recorded outcome stands, nothing was done now.
    earlier: bool = False
