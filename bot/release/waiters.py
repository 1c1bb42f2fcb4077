"""Waking a library's own waiters after its lock was released, as its own unlock does.

The release script wakes them in the same atomic step as the delete; these name the key or
channel (python-redis-lock's signal list, Redisson's unlock channel) for the script and people.
Redisson's fair lock is woken after the delete by `FairWake`: its unlock publishes `0` only on the
channel of the next queued thread whose deadline has not passed
(`redisson_lock__channel:{<name>}:<uuid>:<threadId>`); `FairWake` sends the same and writes
nothing (the woken thread's acquire drops the timed-out ones). A lost wake-up leaves the release
as it is: that thread waits for its own timeout or the next unlock.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import redis
from redis.exceptions import RedisClusterException

from bot.core import logs
from bot.core.display import escape
from bot.core.model import Layout
from bot.core.redisson import CHANNEL, RW_CHANNEL, queue_key, redisson_name, timeout_key
from bot.release.outcome import ApprovedLock, Outcome, Result
from bot.store import slots
from bot.store.fair_queues import next_waiters

#: python-redis-lock's own `signal_expire` default: how long the wake-up element may wait.
SIGNAL_EXPIRE_MS = 1000
#: Redisson's unlock message (`LockPubSub.UNLOCK_MESSAGE`).
UNLOCK_MESSAGE = b"0"
_log = logs.logger("release")


def signal_key(target: ApprovedLock) -> bytes | None:
    if target.layout is Layout.PYTHON_REDIS_LOCK and target.key.startswith(b"lock:"):
        return b"lock-signal:" + target.key[len(b"lock:") :]
    return None


def wake_channel(target: ApprovedLock) -> tuple[bytes, bytes]:
    if target.layout is Layout.REDISSON:
        return redisson_name(CHANNEL, target.key), UNLOCK_MESSAGE
    if target.layout is Layout.REDISSON_RW:
        return redisson_name(RW_CHANNEL, target.key), b"1"
    return b"", b""


def wake_lines(target: ApprovedLock) -> list[str]:
    """What the release script did to wake the library's waiters, for people."""
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


class FairWake:
    """Plain reads, then PUBLISH, not a script: a script would need write access to the keys it
    declares, and a no-writes script may not publish."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def after(self, targets: Sequence[ApprovedLock], results: list[Result]) -> list[Result]:
        """`results`, each deleted fair lock's with a line naming the thread woken, if any."""
        due = [
            (n, t, keys)
            for n, (t, res) in enumerate(zip(targets, results, strict=True))
            if res.outcome is Outcome.RELEASED and not res.earlier
            for keys in [fair_keys(t)]
            if keys is not None
        ]
        if not due:
            return results
        try:
            woken = self._wake(
                [keys for _, _, keys in due], [wake_channel(t)[0] for _, t, _ in due]
            )
        except (redis.RedisError, RedisClusterException) as exc:  # the release stands
            logs.event(_log, "fair_wake_not_sent", logging.INFO, error=type(exc).__name__)
            return results
        out = list(results)
        for (n, _, _), channel in zip(due, woken, strict=True):
            if channel is not None:
                line = (
                    f"Redisson fair lock: published 0 on {escape(channel)} "
                    "(the next thread in its queue)"
                )
                out[n] = replace(out[n], wake=(*out[n].wake, line))
        return out

    def _wake(self, keys: list[tuple[bytes, bytes]], channels: list[bytes]) -> list[bytes | None]:
        """Per lock, the channel its next queued thread was woken on (None: no one)."""
        read = next_waiters(self.client, keys)  # the clock Redisson's timeouts are read by
        chosen = read.threads
        woken = [(i, channels[i] + b":" + t) for i, t in enumerate(chosen) if t is not None]
        sent = self._publish([channel for _, channel in woken])
        refused = read.refused + sum(isinstance(r, Exception) for r in sent)
        if refused:
            logs.event(_log, "fair_wake_not_sent", logging.INFO, refused=refused)
        out: list[bytes | None] = [None] * len(keys)
        for (i, channel), reply in zip(woken, sent, strict=True):
            if not isinstance(reply, Exception):
                out[i] = channel
        return out

    def _publish(self, channels: list[bytes]) -> list[Any]:
        """Each PUBLISH's reply or error (not raised); one call each on a cluster, whose
        pipelines refuse PUBLISH."""
        if not channels:
            return []
        if not slots.is_cluster(self.client):
            with self.client.pipeline(transaction=False) as pipe:
                for channel in channels:
                    pipe.publish(channel, UNLOCK_MESSAGE)
                return pipe.execute(raise_on_error=False)
        sent: list[Any] = []
        for channel in channels:
            try:
                sent.append(self.client.publish(channel, UNLOCK_MESSAGE))
            except redis.RedisError as exc:
                sent.append(exc)
            self._spublish(channel)
        return sent

    def _spublish(self, channel: bytes) -> None:
        """On a cluster Redisson's threads SSUBSCRIBE where the servers have sharded pub/sub
        (`ShardedSubscriptionMode.AUTO`), so SPUBLISH too; a thread hears it once. Refused
        (before 7.0, ACL): the PUBLISH stands."""
        try:
            self.client.spublish(channel, UNLOCK_MESSAGE)
        except (redis.RedisError, RedisClusterException) as exc:
            logs.event(_log, "fair_wake_spublish_refused", logging.DEBUG, error=type(exc).__name__)


def fair_keys(target: ApprovedLock) -> tuple[bytes, bytes] | None:
    """A Redisson lock's fair-lock queue and timeout set; None for any other layout."""
    if target.layout is not Layout.REDISSON:
        return None
    return queue_key(target.key), timeout_key(target.key)
