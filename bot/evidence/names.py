"""Where each lock library keeps what shows a lock's waiters, backlog and owner (pure).

- Redisson (`RedissonObject.prefixName`, `RedissonLock`, `RedissonFairLock`): waiters subscribe to
  `redisson_lock__channel:{NAME}` (no braces added when NAME holds `{`); a fair lock's waiting
  threads are the list `redisson_lock_queue:{NAME}`, and each of them subscribes to its own
  channel `redisson_lock__channel:{NAME}:<uuid>:<thread>` (so they are counted by the list, not
  twice). A read/write lock's waiters subscribe to `redisson_rwlock:{NAME}`. The names are
  `bot.core.redisson`'s (pure, shared with the release's wake-up).
- BullMQ (`queue-keys.ts`; 6.x `utils/create-backend.ts`, 5.x `worker.ts`; both checked against
  the real library in tests/evidence/test_bullmq_real.py): a job lock `<prefix>:<queue>:<job>:lock`;
  the queue's waiting work is the lists `<prefix>:<queue>:wait` and `:paused` (5.x `pause` moves
  `wait` to `paused`, 6.x keeps the jobs in `wait`) and the sorted set `:prioritized`; a worker
  names its blocking connection `<prefix>:<base64 queue>`, followed by `:w:<worker name>` when
  the worker has a name (`QueueGetters.getWorkers` matches the same two forms). Queue names
  cannot hold `:` (`queue-base.ts`), nor can custom job ids (`job.ts`), save ids of exactly three
  parts, which `job.ts` lets through for legacy repeatable jobs: the lock of a custom `a:b:c` is
  misread (queue `b`; the key alone cannot tell). A job scheduler's (and 5.x's legacy
  repeatable) jobs have the id `repeat:<scheduler id>:<millis>` (`job-scheduler.ts`), and a
  scheduler id may hold `:`; the prefix may hold `:` too. The key parsing is
  `bot.core.bullmq` (pure, shared with the lock layouts).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from bot.core.bullmq import job_lock


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
    """The queue of a job lock `<prefix>:<queue>:<job>:lock`, or None for another shape (read
    apart by `bot.core.bullmq.job_lock`, which says how a scheduler's job id is found)."""
    lock = job_lock(key)
    return None if lock is None else BullQueue(prefix=lock.prefix, queue=lock.queue)
