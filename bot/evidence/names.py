"""Where each lock library keeps what shows a lock's waiters, backlog and owner (pure).

- Redisson (`RedissonObject.prefixName`, `RedissonLock`, `RedissonFairLock`): waiters subscribe to
  `redisson_lock__channel:{NAME}` (no braces added when NAME holds `{`); a fair lock's waiting
  threads are the list `redisson_lock_queue:{NAME}`, and each of them subscribes to its own
  channel `redisson_lock__channel:{NAME}:<uuid>:<thread>` (so they are counted by the list, not
  twice). A read/write lock's waiters subscribe to `redisson_rwlock:{NAME}`.
- BullMQ (`queue-keys.ts`, `utils/create-backend.ts`): a job lock `<prefix>:<queue>:<job>:lock`;
  the queue's waiting work is the lists `<prefix>:<queue>:wait` and `:paused` and the sorted set
  `:prioritized`; a worker names its blocking connection `<prefix>:<base64 queue>`, followed by
  `:w:<worker name>` when the worker has a name. Queue names cannot hold `:`.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

REDISSON_CHANNEL = b"redisson_lock__channel"
REDISSON_QUEUE = b"redisson_lock_queue"
REDISSON_RW_CHANNEL = b"redisson_rwlock"


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
    """The queue of a job lock `<prefix>:<queue>:<job>:lock`, or None for another shape."""
    parts = key.rsplit(b":", 3)
    if len(parts) != 4 or parts[3] != b"lock" or not all(parts[:3]):
        return None
    return BullQueue(prefix=parts[0], queue=parts[1])
