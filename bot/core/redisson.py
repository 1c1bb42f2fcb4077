"""Redisson's names around a lock, and whom its fair lock's unlock wakes (pure).

From Redisson's source: every key and channel of lock `NAME` is `<prefix>:{NAME}` (a hash tag,
added unless NAME holds `{`). A fair lock queues `<uuid>:<threadId>` in `redisson_lock_queue`,
each with its deadline in `redisson_lock_timeout`; its unlock drops the timed-out head threads,
then wakes the next one only. Shared by the evidence and the release's own wake-up
(`bot.release.waiters`), so what a finding says the release will do is what it does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

CHANNEL = b"redisson_lock__channel"
RW_CHANNEL = b"redisson_rwlock"
QUEUE = b"redisson_lock_queue"
TIMEOUT = b"redisson_lock_timeout"
#: Queued threads looked at, at most, for the next one not timed out.
HEAD_LOOK = 32


def redisson_name(prefix: bytes, name: bytes) -> bytes:
    """Redisson's `prefixName`: `prefix:{name}`, or `prefix:name` when name already holds `{`."""
    return prefix + b":" + (name if b"{" in name else b"{" + name + b"}")


def queue_key(name: bytes) -> bytes:
    return redisson_name(QUEUE, name)


def timeout_key(name: bytes) -> bytes:
    return redisson_name(TIMEOUT, name)


def next_waiter(threads: Sequence[Any], scores: Sequence[Any], now_ms: int) -> bytes | None:
    """The first queued thread whose deadline has not passed (or has none), as a fair lock's
    unlock finds it; None when all timed out or one could not be read (then it is not known)."""
    for thread, score in zip(threads, scores, strict=True):
        if isinstance(score, Exception) or not isinstance(thread, bytes):
            return None
        if score is None or float(score) > now_ms:
            return thread
    return None
