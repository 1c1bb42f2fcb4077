"""Redisson's names for what surrounds a lock, and whom its fair lock's unlock wakes (pure).

Read in Redisson's source (`RedissonObject.prefixName`, `RedissonLock`, `RedissonFairLock`,
`RedissonReadWriteLock`): every key and channel of a lock `NAME` is `<prefix>:{NAME}`, braces
(a hash tag, so that all of them share the lock's Cluster slot) added unless NAME holds `{`.

- waiters of a lock subscribe to `redisson_lock__channel:{NAME}`, of a read/write lock to
  `redisson_rwlock:{NAME}`;
- a fair lock's waiting threads queue in the list `redisson_lock_queue:{NAME}` as
  `<uuid>:<threadId>`, each with its deadline (ms) in the sorted set
  `redisson_lock_timeout:{NAME}`, and each subscribes to a channel of its own,
  `redisson_lock__channel:{NAME}:<uuid>:<threadId>`;
- a fair lock's unlock drops the queue's head threads whose deadline passed, then wakes the
  next one only (`next_waiter`).

One place for both readers of these names: the evidence (`bot.evidence`: who waits, whom the
release wakes) and the release's own wake-up (`bot.release.waiters`), so that what a finding says
the release will do is what it does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

CHANNEL = b"redisson_lock__channel"
RW_CHANNEL = b"redisson_rwlock"
QUEUE = b"redisson_lock_queue"
TIMEOUT = b"redisson_lock_timeout"
#: Queued threads looked at, at most, for the next one not timed out (the wake-up and the
#: evidence of whom it wakes read the same ones).
HEAD_LOOK = 32


def redisson_name(prefix: bytes, name: bytes) -> bytes:
    """Redisson's `prefixName`: `prefix:{name}`, or `prefix:name` when name already holds `{`."""
    return prefix + b":" + (name if b"{" in name else b"{" + name + b"}")


def queue_key(name: bytes) -> bytes:
    """A fair lock's queue of waiting threads."""
    return redisson_name(QUEUE, name)


def timeout_key(name: bytes) -> bytes:
    """A fair lock's waiting threads' deadlines."""
    return redisson_name(TIMEOUT, name)


def next_waiter(threads: Sequence[Any], scores: Sequence[Any], now_ms: int) -> bytes | None:
    """The first queued thread whose deadline has not passed (or that has none), as a fair
    lock's unlock finds it once it dropped the timed-out ones. None when every thread timed out,
    or when a thread or its deadline could not be read (an error reply): then whom Redisson
    would wake is not known."""
    for thread, score in zip(threads, scores, strict=True):
        if isinstance(score, Exception) or not isinstance(thread, bytes):
            return None
        if score is None or float(score) > now_ms:
            return thread
    return None
