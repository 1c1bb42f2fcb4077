"""Where each lock library keeps what shows a lock's waiters, backlog and owner (pure).

- Redisson (`RedissonObject.prefixName`, `RedissonLock`, `RedissonFairLock`): waiters subscribe to
  `redisson_lock__channel:{NAME}` (no braces added when NAME holds `{`); a fair lock's waiting
  threads are the list `redisson_lock_queue:{NAME}`, and each of them subscribes to its own
  channel `redisson_lock__channel:{NAME}:<uuid>:<thread>` (so they are counted by the list, not
  twice). A read/write lock's waiters subscribe to `redisson_rwlock:{NAME}`.
- BullMQ (`queue-keys.ts`; 6.x `utils/create-backend.ts`, 5.x `worker.ts`; both checked against
  the real library in tests/evidence/test_bullmq_real.py): a job lock `<prefix>:<queue>:<job>:lock`;
  the queue's waiting work is the lists `<prefix>:<queue>:wait` and `:paused` (5.x `pause` moves
  `wait` to `paused`, 6.x keeps the jobs in `wait`) and the sorted set `:prioritized`; a worker
  names its blocking connection `<prefix>:<base64 queue>`, followed by `:w:<worker name>` when
  the worker has a name (`QueueGetters.getWorkers` matches the same two forms). Queue names and
  custom job ids cannot hold `:` (`queue-base.ts`, `job.ts`), but a job scheduler's (and 5.x's
  legacy repeatable) jobs have the id `repeat:<scheduler id>:<millis>` (`job-scheduler.ts`), and
  a scheduler id may hold `:`; the prefix may hold `:` too.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

REDISSON_CHANNEL = b"redisson_lock__channel"
REDISSON_QUEUE = b"redisson_lock_queue"
REDISSON_RW_CHANNEL = b"redisson_rwlock"
_LOCK = b":lock"
_REPEAT = b":repeat:"  # before a scheduler job's id `repeat:<scheduler id>:<millis>`


def redisson_name(prefix: bytes, name: bytes) -> bytes:
    """Redisson's `prefixName`: `prefix:{name}`, or `prefix:name` when name already holds `{`."""
    return prefix + b":" + (name if b"{" in name else b"{" + name + b"}")


@dataclass(frozen=True, slots=True)
class BullQueue:
    """The queue a BullMQ job lock belongs to."""

    prefix: bytes  # `bull`, or a custom prefix such as `{bull}` (it may hold `:`)
    queue: bytes

    @property
    def keys(self) -> tuple[bytes, bytes, bytes]:
        """The `wait` and `paused` lists and the `prioritized` sorted set."""
        base = self.prefix + b":" + self.queue + b":"
        return base + b"wait", base + b"paused", base + b"prioritized"

    @property
    def worker_name(self) -> bytes:
        """The name a worker of this queue gives its blocking connection (before `:w:<name>`)."""
        return self.prefix + b":" + base64.b64encode(self.queue)

    def is_worker(self, client_name: bytes) -> bool:
        """Does a connection of this name belong to a worker of this queue?"""
        base = self.worker_name
        return client_name == base or client_name.startswith(base + b":w:")


def bull_queue(key: bytes) -> BullQueue | None:
    """The queue of a job lock `<prefix>:<queue>:<job>:lock`, or None for another shape.

    A job id holds `:` only as a scheduler's `repeat:<scheduler id>:<millis>`: the first
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
                return BullQueue(prefix=body[:colon], queue=body[colon + 1 : at])
            at = body.find(_REPEAT, at + 1)
    parts = body.rsplit(b":", 2)
    if len(parts) != 3 or not all(parts):
        return None
    return BullQueue(prefix=parts[0], queue=parts[1])
