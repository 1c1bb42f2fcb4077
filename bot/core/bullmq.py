"""BullMQ's key names (pure): which strings of a queue are its own bookkeeping, and whose job a
job lock is.

BullMQ (`queue-keys.ts` and its Lua scripts) names every key of a queue
`<prefix>:<queue>:<kind>[:...]`; the prefix may hold `:`, a queue name cannot. Its one lock is
`<job id>:lock` (a worker token `<uuid>:<n>`); its other strings (`id`, `pc`, `stalled-check`,
`limiter`, `de:<id>`) and every hash are bookkeeping. The scan judges each key alone, so the key's
shape decides, the value only where it proves the key is not BullMQ's (the rules and the
trade-off: docs/layouts.md). Declining is the safe side: a `not_a_lock` key is shown with its
reason and never flagged, put in a case or deleted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LOCK = b":lock"
_REPEAT = b":repeat:"  # before a scheduler job's id `repeat:<scheduler id>:<millis>`
_COUNTERS = (b":id", b":pc")
PREFIXES = (b"bull:", b"{bull}:")
_DEDUP = b":de:"
#: The one cheap test `layouts` runs on every string before the stricter `bookkeeping`: a key it
#: does not match is not BullMQ's. Linear in the key's length.
GATE = re.compile(rb"\{?bull\}?:|.*:(?:de:.|(?:stalled-check|limiter|id|pc)\Z)", re.DOTALL)
_JOB_FIELDS = frozenset({b"name", b"data", b"opts"})
_HASH_SUFFIXES = (b":meta", b":processed", b":failed")
_HASH_INFIXES = (b":repeat:", b":dn:", b":metrics:")
_WHY = "BullMQ's own bookkeeping, not a lock (only its `…:<job id>:lock` keys are locks): "


@dataclass(frozen=True, slots=True)
class JobLock:
    """A job lock key `<prefix>:<queue>:<job id>:lock`, read apart."""

    prefix: bytes
    queue: bytes
    job: bytes


def job_lock(key: bytes) -> JobLock | None:
    """The prefix, queue and job id of a job lock `<prefix>:<queue>:<job>:lock`, or None.

    A scheduler's job id is `repeat:<scheduler id>:<millis>`: the first `:repeat:` with a prefix
    and a queue before it and `<id>:<digits>` after it starts the job id; else the job id is the
    last part. Ambiguous keys (and a custom three-part id) are misread only in the owner text and
    the evidence."""
    if not key.endswith(_LOCK):
        return None
    body = key[: -len(_LOCK)]
    last = body.rfind(b":")
    if body[last + 1 :].isdigit():  # perhaps `repeat:<id>:<millis>`; linear in the key's length
        at = body.find(_REPEAT)
        while at >= 0 and at + len(_REPEAT) < last:  # a scheduler id between them
            colon = body.rfind(b":", 0, at)
            if 0 < colon < at - 1:  # a prefix and a queue before it
                return JobLock(body[:colon], body[colon + 1 : at], body[at + 1 :])
            at = body.find(_REPEAT, at + 1)
    parts = body.rsplit(b":", 2)
    if len(parts) != 3 or not all(parts):
        return None
    return JobLock(parts[0], parts[1], parts[2])


def bookkeeping(key: bytes, value: bytes, pttl_ms: int) -> str:
    """Why the string `key` holding `value` is BullMQ's own bookkeeping, or ""."""
    if key.endswith(b":stalled-check"):
        return _WHY + "its stalled-jobs check (`<prefix>:<queue>:stalled-check`)"
    if key.endswith(b":limiter"):
        return _WHY + "its rate limiter's counter (`<prefix>:<queue>:limiter`)"
    if key.endswith(_COUNTERS) and pttl_ms == -1 and value.isdigit() and _queued(key, len(key) - 3):
        return _WHY + f"its counter `<prefix>:<queue>:{key[-2:].decode()}` (no expiry)"
    if _DEDUP in key and _could_be_job_id(value) and _dedup_key(key):
        return _WHY + "a deduplication key `<prefix>:<queue>:de:<id>` (its value is a job id)"
    if key.startswith(PREFIXES) and not key.endswith(_LOCK):
        return _WHY + "a key under BullMQ's prefix"
    return ""


def hash_bookkeeping(key: bytes, fields: tuple[tuple[bytes, bytes], ...]) -> str:
    """Why the hash `key` is BullMQ's own (for loose recognition, which takes any other hash for
    a lock), or ""."""
    if key.startswith(PREFIXES):
        return _WHY + "a hash under BullMQ's prefix"
    names = {n for n, _ in fields}
    if names >= _JOB_FIELDS:
        return _WHY + "a job's hash (`name`, `data`, `opts`)"
    for suffix in _HASH_SUFFIXES:
        if key.endswith(suffix) and _queued(key, len(key) - len(suffix)):
            return _WHY + f"its `<prefix>:<queue>{suffix.decode()}` hash"
    for infix in _HASH_INFIXES:
        at = key.find(infix)
        while at >= 0 and at + len(infix) < len(key):
            if _queued(key, at):
                return _WHY + f"its `<prefix>:<queue>{infix.decode()}<...>` hash"
            at = key.find(infix, at + 1)
    return ""


def _queued(key: bytes, at: int) -> bool:
    """Are there two non-empty parts, `<prefix>:<queue>`, before the `:` at `at`?"""
    colon = key.rfind(b":", 0, at)
    return 0 < colon < at - 1


def _dedup_key(key: bytes) -> bool:
    at = key.find(_DEDUP)
    while at >= 0 and at + len(_DEDUP) < len(key):  # a deduplication id after it
        if _queued(key, at):
            return True
        at = key.find(_DEDUP, at + 1)
    return False


def _could_be_job_id(value: bytes) -> bool:
    return bool(value) and (
        b":" not in value or value.startswith(b"repeat:") or value.count(b":") == 2
    )
