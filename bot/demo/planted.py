"""What the demo plants on its embedded Redis: locks as their libraries leave them when the worker
is SIGKILLed mid-job, one live lock whose owner keeps renewing it, and, as threads, the demo's
other processes (the contenders re-arming a dead counter lock, the live owner, a subscriber to
the reclaim events)."""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import suppress

import redis

CHANNEL = "locks:reclaimed"
COUNTER_KEY = b"\x17\x00\x00\x00\x00\x00\x00\x30\x39"  # Stalwart 0.12 task lock, task 12345
LIVE_KEY = b"lock:live-worker"
#: Dead, but their libraries renew on their own (ShedLock's keep-alive, Redisson's watchdog) and
#: lockguard has not yet watched a renewal come due: reported with when it will be, not offered.
NOT_DUE_KEYS = (b"job-lock:default:cleanupJob", b"redisson:orders:settle")


def _uuid1_at(epoch_s: float) -> bytes:
    """A redis-py Lock token (uuid1 hex) minted at `epoch_s`: lockguard reads the age from it."""
    ticks = int(epoch_s * 10_000_000) + 0x01B21DD213814000
    u = uuid.UUID(
        fields=(
            ticks & 0xFFFFFFFF,
            (ticks >> 32) & 0xFFFF,
            ((ticks >> 48) & 0x0FFF) | 0x1000,
            0x80,
            0x11,
            0x0242AC110002,
        )
    )
    return u.hex.encode()


def plant(client: redis.Redis, now_s: float) -> list[tuple[bytes, str]]:
    """The locks, each with what it is, in the order they were planted."""
    client.set(b"lock:nightly-report", base64.b64encode(os.urandom(18)))
    client.set(b"lock:invoice-export", _uuid1_at(now_s - 2 * 3600))
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(now_s - 3 * 3600))
    client.set(b"job-lock:default:cleanupJob", f"ADDED:{stamp}@batch-7:{uuid.uuid4()}", ex=3600)
    client.hset(b"redisson:orders:settle", f"{uuid.uuid4()}:87", b"2")
    client.pexpire(b"redisson:orders:settle", 2 * 3600 * 1000)
    client.set(COUNTER_KEY, b"1", ex=300)
    client.set(LIVE_KEY, uuid.uuid1().hex.encode(), px=10_000)
    return [
        (b"lock:nightly-report", "python-redis-lock, owner killed, no expiry"),
        (
            b"lock:invoice-export",
            "redis-py Lock(timeout=None), taken 2 h ago (the uuid1 token says so)",
        ),
        (
            b"job-lock:default:cleanupJob",
            "ShedLock, lockAtMostFor 4 h, node batch-7 died 3 h ago (1 h left)",
        ),
        (
            b"redisson:orders:settle",
            "Redisson RLock, explicit 2 h leaseTime (no watchdog), client gone",
        ),
        (
            COUNTER_KEY,
            "Stalwart 0.12 task lock: INCR+EXPIRE, owner dead, contenders "
            "retry every 0.5 s and re-arm its TTL",
        ),
        (LIVE_KEY, "redis-py Lock with a live owner renewing every second"),
    ]


class Background:
    """The demo's other processes, as threads: contenders, the live owner, the subscriber."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.stop = threading.Event()
        self.events: list[dict[str, object]] = []
        self.threads: list[threading.Thread] = []
        self._pubsub = client.pubsub(ignore_subscribe_messages=True)
        self._pubsub.subscribe(CHANNEL)

    def start(self) -> None:
        for target in (self._contenders, self._renewer, self._listen):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self.threads.append(t)

    def _every(self, seconds: float, action: Callable[[], None]) -> None:
        while not self.stop.wait(seconds):
            try:
                action()
            except redis.RedisError:
                return

    def _contenders(self) -> None:
        def attempt() -> None:
            with self.client.pipeline(transaction=True) as pipe:  # Stalwart 0.12's try_lock
                pipe.incr(COUNTER_KEY)
                pipe.expire(COUNTER_KEY, 300)
                pipe.execute()

        self._every(0.5, attempt)

    def _renewer(self) -> None:
        def renew() -> None:
            self.client.pexpire(LIVE_KEY, 10_000)

        self._every(1.0, renew)

    def _listen(self) -> None:
        while not self.stop.is_set():
            try:
                msg = self._pubsub.get_message(timeout=0.1)
            except (redis.RedisError, ValueError):
                return
            if msg and msg.get("type") == "message":
                self.events.append(json.loads(msg["data"]))

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(2)
        with suppress(redis.RedisError):
            self._pubsub.close()
