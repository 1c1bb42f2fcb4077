"""One target's active replica: the lease `{lockguard}:leader`, whose holder runs the scheduled
scans and digests (every replica answers Slack and resumes releases).

Taken with `SET NX PX` holding `{"token", "replica", "since_ms"}` with a random token (never
`INCR`+`EXPIRE`: a death between the two leaves a lease without expiry); renewed (by
`bot.ops.shards`, every lease/3) and given back only while the key still holds exactly the bytes
written here (`bot.store.lease_keys`). `is_leader()` holds only until the last renewal's send time
plus the lease minus a margin, so a replica that cannot renew stops before Redis can expire the
key and another take it: two replicas never both believe they lead. The key and its value stay
as they are: replicas of different versions take turns on them during a rolling upgrade.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

from bot.core import logs
from bot.core.display import escape
from bot.store import lease_keys
from bot.store.keyspace import LEADER
from bot.store.scans import server_ms

DEFAULT_LEASE_MS = 30_000
#: The setting's floor is 5 s (`LOCKGUARD_LEADER_LEASE_SECONDS`); tests go down to 1 s.
MIN_LEASE_MS = 1_000
_log = logs.logger("leader")


def replica_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds the lease now (`/lockguard status`): never the token."""

    replica: str
    since_ms: int
    ttl_ms: int
    me: bool  # this Leader object holds it


class Leader:
    """One target's leader lease. Whoever beats for it (`bot.ops.shards.Shards`) takes, renews
    and gives it back, and calls `notify()` for the `on_change` listeners."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        lease_ms: int = DEFAULT_LEASE_MS,
        replica: str | None = None,
        margin_ms: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if lease_ms < MIN_LEASE_MS:
            raise ValueError(f"leader lease must be at least {MIN_LEASE_MS} ms")
        self.client = client
        self.lease_ms = lease_ms
        self.replica = replica or replica_id()
        #: Leadership ends locally this long before the lease could lapse in Redis.
        self.margin_ms = lease_ms // 5 if margin_ms is None else margin_ms
        if not 0 < self.margin_ms < lease_ms:
            raise ValueError("the safety margin must be between 0 and the lease")
        self._clock = clock
        self._lock = threading.Lock()
        self._value: bytes | None = None  # the exact bytes we stored, while we think we hold it
        self._deadline = 0.0  # local monotonic time until which we lead
        self._listeners: list[Callable[[bool], None]] = []
        self._was_leader = False

    def is_leader(self) -> bool:
        with self._lock:
            return self._value is not None and self._clock() < self._deadline

    def try_acquire(self) -> bool:
        """Lead if the lease is free (or renew it if ours)."""
        if self._value is not None and self.renew():
            return True
        token = secrets.token_hex(16)
        value = json.dumps(
            {"token": token, "replica": self.replica, "since_ms": server_ms(self.client)},
            separators=(",", ":"),
        ).encode()
        sent = self._clock()
        if not lease_keys.take(self.client, LEADER, value, self.lease_ms):
            return False
        with self._lock:
            self._value = value
            self._deadline = sent + (self.lease_ms - self.margin_ms) / 1000
        logs.event(_log, "leader_acquired", replica=self.replica, lease_ms=self.lease_ms)
        return True

    def renew(self) -> bool:
        """Only while it is exactly ours. False when it is not (leadership ends at once) or Redis
        failed (leadership ends at the local deadline)."""
        with self._lock:
            value = self._value
        if value is None:
            return False
        sent = self._clock()
        try:
            ok = lease_keys.renew(self.client, LEADER, value, self.lease_ms)
        except redis.RedisError as exc:
            logs.event(
                _log,
                "leader_renew_failed",
                logging.WARNING,
                replica=self.replica,
                error=type(exc).__name__,
            )
            return False
        with self._lock:
            if self._value != value:
                return False  # released meanwhile
            if ok:
                self._deadline = sent + (self.lease_ms - self.margin_ms) / 1000
                return True
            self._value = None
            self._deadline = 0.0
        logs.event(
            _log,
            "leader_lost",
            logging.WARNING,
            replica=self.replica,
            reason="the lease is held by another replica or lapsed",
        )
        return False

    def release(self) -> bool:
        """Only if it is still ours. True when it was deleted."""
        with self._lock:
            value, self._value, self._deadline = self._value, None, 0.0
        if value is None:
            return False
        deleted = lease_keys.give_back(self.client, LEADER, value)
        if deleted:
            logs.event(_log, "leader_released", replica=self.replica)
        return deleted

    def forget(self) -> None:
        """Stop leading without a word to Redis: the lease lapses as after a crash."""
        with self._lock:
            self._value, self._deadline = None, 0.0

    def holder(self) -> Holder | None:
        """As Redis says; None when nobody leads."""
        with self.client.pipeline(transaction=False) as pipe:
            pipe.get(LEADER)
            pipe.pttl(LEADER)
            raw, ttl = pipe.execute()
        if not isinstance(raw, bytes):
            return None
        with self._lock:
            mine = raw == self._value
        try:
            data = json.loads(raw)
            return Holder(
                replica=str(data["replica"]),
                since_ms=int(data["since_ms"]),
                ttl_ms=int(ttl),
                me=mine,
            )
        except (ValueError, KeyError, TypeError):
            return Holder(replica=escape(raw, 60), since_ms=0, ttl_ms=int(ttl), me=mine)

    def on_change(self, listener: Callable[[bool], None]) -> None:
        """`listener(leading)`, on the heartbeat's thread, whenever leadership changes."""
        self._listeners.append(listener)

    def stop(self, *, release: bool = True) -> None:
        """`release=False` leaves the lease to lapse, as a crash would."""
        if release:
            try:
                self.release()
            except redis.RedisError as exc:  # it lapses by itself within one lease
                logs.event(
                    _log,
                    "leader_release_failed",
                    logging.WARNING,
                    replica=self.replica,
                    error=type(exc).__name__,
                )
        self.notify()

    def notify(self) -> None:
        """Tell the listeners if leadership changed since they were last told."""
        leading = self.is_leader()
        if leading == self._was_leader:
            return
        self._was_leader = leading
        logs.event(_log, "leader_changed", replica=self.replica, leading=leading)
        for listener in list(self._listeners):
            try:
                listener(leading)
            except Exception as exc:
                logs.event(
                    _log,
                    "leader_listener_failed",
                    logging.ERROR,
                    replica=self.replica,
                    error=f"{type(exc).__name__}: {exc}"[:200],
                )
