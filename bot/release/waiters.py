"""Waking a library's own waiters after its lock was released.

The release script does the waking itself, in the same atomic step as the delete; these say
which key or channel that is for a lock, so the script can be given it and people told.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.core.display import escape
from bot.core.model import Layout

if TYPE_CHECKING:
    from bot.release.model import Target

#: python-redis-lock's own `signal_expire` default: how long the wake-up element may wait.
SIGNAL_EXPIRE_MS = 1000


def signal_key(target: Target) -> bytes | None:
    if target.layout is Layout.PYTHON_REDIS_LOCK and target.key.startswith(b"lock:"):
        return b"lock-signal:" + target.key[len(b"lock:") :]
    return None


def wake_channel(target: Target) -> tuple[bytes, bytes]:
    if target.layout is Layout.REDISSON:
        return _redisson_name(b"redisson_lock__channel", target.key), b"0"
    if target.layout is Layout.REDISSON_RW:
        return _redisson_name(b"redisson_rwlock", target.key), b"1"
    return b"", b""


def _redisson_name(prefix: bytes, name: bytes) -> bytes:
    """Redisson's `prefixName`: braces (a hash tag) added unless the name already has one."""
    if b"{" in name:
        return prefix + b":" + name
    return prefix + b":{" + name + b"}"


def wake_lines(target: Target) -> list[str]:
    """What the release script did to wake the library's own waiters, for people."""
    signal = signal_key(target)
    if signal is not None:
        return [
            f"python-redis-lock: pushed one wake-up onto {escape(signal)} "
            "(one blocked waiter retries)"
        ]
    channel, message = wake_channel(target)
    if channel:
        return [f"Redisson: published {message.decode()} on {escape(channel)}"]
    return []
