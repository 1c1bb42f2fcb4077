"""The one active replica: a lease in Redis that says which `lockguard serve` runs the schedules.

Every replica answers Slack; only the lease holder runs scheduled scans and digests
(`bot.ops.scheduler`; cut-short releases are resumed by any replica, `bot.ops.resumer`). The lease
is `{lockguard}:leader` (`bot.store.keyspace`):

- taken with `SET NX PX lease` holding a JSON value `{"token", "replica", "since_ms"}` with a
  random token: never `INCR`+`EXPIRE`, which leaves a lease without expiry when the process dies
  between the two;
- renewed by the heartbeat (`bot.ops.shards.Shards`, one thread for every target of the fleet,
  the one implicit target's too) every lease/3, with a `PEXPIRE` only while the value is still
  exactly the bytes this replica wrote (`bot.store.lease_keys`: a script, or a transaction where
  scripting is refused);
- released the same way, only while it is ours (a compare-and-delete), so a slow replica can
  never delete the lease a newer holder took.

Leadership is also judged locally: `is_leader()` is true only until the last successful renewal
(timed from just before it was sent) plus the lease period minus a safety margin. Redis expires
the key no earlier than that renewal plus the lease, so a replica that cannot renew (Redis
unreachable, the process paused) stops scheduling before its lease can lapse and before another
replica can take it over: two replicas never both believe they lead. A renewal that finds another
value in the key ends leadership at once. When the holder dies, the others (polling every
lease/3, and waking when the key's remaining TTL runs out) take over within one lease period.
The key and its value are the same for every version that shares a Redis: replicas of an older
lockguard (whose `Leader` had a heartbeat thread of its own) and newer ones take turns on it
during a rolling upgrade.
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
    """This process, for people: `hostname:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds the lease now (`/lockguard status`): never the token."""

    replica: str
    since_ms: int
    ttl_ms: int
    me: bool  # this Leader object holds it


class Leader:
    """One target's leader lease: take, renew, give back, whether (and who) holds it now, and
    its `on_change` listeners, told by whoever beats for it (`bot.ops.shards.Shards`, which
    takes, renews and gives back every target's lease by the fleet's rule). `stop()` gives it
    back unless told otherwise, so another replica need not wait for it to lapse."""

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
        """Lead if the lease is free (or renew it if ours). True when this replica leads."""
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
        """Extend the lease while it is still exactly ours. False when it is not ours any more
        (leadership ends at once) or Redis failed (leadership ends at the local deadline)."""
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
        """Give the lease back, only if it is still ours. True when it was deleted."""
        with self._lock:
            value, self._value, self._deadline = self._value, None, 0.0
        if value is None:
            return False
        deleted = lease_keys.give_back(self.client, LEADER, value)
        if deleted:
            logs.event(_log, "leader_released", replica=self.replica)
        return deleted

    def forget(self) -> None:
        """Stop leading here without a word to Redis: the lease lapses by itself (as after a
        crash), and nothing renews it from this object again."""
        with self._lock:
            self._value, self._deadline = None, 0.0

    def holder(self) -> Holder | None:
        """Who leads now, as Redis says (None when nobody does)."""
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
        """Call `listener(leading)` (from the heartbeat's thread) whenever leadership changes."""
        self._listeners.append(listener)

    def stop(self, *, release: bool = True) -> None:
        """`release=False` leaves the lease to lapse (as a crash would); the listeners are told."""
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
        """Tell the listeners if leadership changed since they were last told (whoever beats
        for this lease calls it after each beat)."""
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
