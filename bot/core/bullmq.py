"""BullMQ's key names (pure): which strings of a queue are its own bookkeeping, and whose job a job
lock is.

BullMQ (taskforcesh/bullmq `src/classes/queue-keys.ts`, the Lua scripts of `src/commands/`) names
every key of a queue `<prefix>:<queue>:<kind>[:...]`. The prefix (default `bull`) may hold `:`; a
queue name cannot (`queue-base.ts`). The strings it writes, the only type lockguard could take for
a lock:
- `<job id>:lock`: the job lock, a worker token `<uuid>:<n>` with PX lockDuration: the one lock;
- `id`, `pc`: INCR counters (job ids, priority order), never with a TTL;
- `stalled-check` (a ms time, PX stalledInterval) and `limiter` (INCR + PEXPIRE);
- `de:<deduplication id>`: the id of the job holding it, with PX ttl or none
  (`setDeduplicationKey.lua`); a deduplication id may hold `:`.
Everything else of a queue is a hash (a job `<job id>`, `meta`, `repeat:<scheduler id>`,
`dn:<id>`, `<job id>:processed` / `:failed`, `metrics:<kind>`), a list, a set, a sorted set or a
stream: never a lock, and loose recognition (which takes any hash for one) asks
`hash_bookkeeping`. A job id is an INCR number, a custom id (no `:`, or exactly three
parts, `job.ts`) or a scheduler's `repeat:<scheduler id>:<millis>`, whose scheduler id may hold `:`.

The trade-off (docs/layouts.md): the scan judges each key on its own, so the key's
shape decides, with the value only where it can prove the key is not BullMQ's. A string is taken
for BullMQ's bookkeeping, under any prefix, when
- it ends `:stalled-check` or `:limiter`, or lies under `bull:` / `{bull}:` and does not end
  `:lock` (as before);
- it is `<prefix>:<queue>:de:<id>` (two non-empty parts or more before a `:de:`) and its value
  could be a job id (has no `:`, starts `repeat:`, or has exactly three parts): an app lock such
  as `app:jobs:de:sync` holding a plain token is declined too, while `lock:de:x` (one part before)
  and any value no job id can be (a `<uuid>:<n>` token, ShedLock's `ADDED:<time>@<host>`) stay
  locks;
- it is `<prefix>:<queue>:id` or `:pc` holding a positive integer with no TTL (no lease has one).
Declining is the safe side: a key lockguard calls `not_a_lock` is shown with the reason and never
flagged, put in a case or deleted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LOCK = b":lock"
_REPEAT = b":repeat:"  # before a scheduler job's id `repeat:<scheduler id>:<millis>`
_COUNTERS = (b":id", b":pc")
PREFIXES = (b"bull:", b"{bull}:")
_DEDUP = b":de:"
#: The one test `layouts` runs on every string before asking `bookkeeping` (which is stricter):
#: a key it does not match is not BullMQ's. One anchored match costs what the two bytes tests
#: it replaces did on a short key (callgrind: ~2,600 instructions per key, where the three tests
#: `startswith`, `endswith` and `in` took ~5,400); linear in the key's length.
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
    """The prefix, queue and job id of a job lock `<prefix>:<queue>:<job>:lock`, or None for
    another shape.

    A job id holds `:` as a scheduler's `repeat:<scheduler id>:<millis>` (a custom id of exactly
    three parts, which `job.ts` also lets through, is misread: its first two parts are taken
    for the prefix's and the queue's, so only the owner text and the evidence are wrong): the first
    `:repeat:` that leaves a prefix and a queue before it and `<id>:<digits>` after it starts the
    job id; otherwise the job id is the last part. The key alone cannot tell two readings apart
    when a scheduler's job lock is under a prefix with a `repeat` part after its first, or in a
    queue named `repeat` under a prefix holding `:`; both are read the first way."""
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
    """Why the string `key` holding `value` is BullMQ's own bookkeeping (module docstring), or ""
    when it is not."""
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
    a lock), or "": under `bull:` / `{bull}:`; a job (`name`, `data` and `opts` fields: a job
    `<prefix>:<queue>:<job id>`, a scheduler's next job, a deduplicated next job `dn:<id>`); a
    queue's `meta`, a parent's `<job id>:processed` / `:failed`, a scheduler `repeat:<id>`,
    `metrics:<kind>`, `dn:<id>` by name after `<prefix>:<queue>`."""
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
