"""The fleet's leader leases, shared by the `serve` replicas: one per target, in that target's own
Redis (`bot.ops.leader`), kept by one heartbeat thread. At every beat (lease/3, or when a lease
another holds would lapse) a replica records itself in every target's `{lockguard}:replicas`
(replica -> server ms until which it counts as alive) and renews what it holds; with R the largest
live count a reachable target gave, it holds at most ceil(N / R) of the N leases, giving back its
least preferred extra ones and taking free ones, most preferred first (rendezvous hashing, so
replicas that start together reach for different targets). So each lease has one holder, every
reachable target is held once each replica has beaten, and a target whose Redis does not answer
is skipped (its lease lapses). The rule and what follows from it: docs/fleet.md.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import suppress
from dataclasses import dataclass

import redis
from redis.exceptions import RedisClusterException

from bot.core import logs
from bot.ops.leader import Leader
from bot.store.keyspace import LEADER, REPLICAS
from bot.store.refusals import refusal
from bot.store.scans import server_ms

#: Threads that visit the targets' Redis at each beat (a slow or dead one never stalls the rest).
MAX_WORKERS = 8
MIN_WAIT_S = 0.05
#: Characters of a refusal kept for `/healthz`.
REFUSAL_TEXT = 300
_log = logs.logger("fleet.shards")


@dataclass(frozen=True, slots=True)
class Visit:
    """What one target's Redis said at a beat: live replicas, and the lease's PTTL before any
    renewal (-2: free; -1: a key without expiry, left alone)."""

    live: int
    lease_ttl_ms: int


def preference(names: list[str], replica: str) -> list[str]:
    """The targets in this replica's order of preference (rendezvous hashing)."""
    return sorted(names, key=lambda n: hashlib.sha256(f"{n}\n{replica}".encode()).digest())


def quota(targets: int, replicas: int) -> int:
    return -(-targets // max(replicas, 1))


class Visitor:
    """Visits every target's Redis at once, on a bounded pool. A visit still waiting on its Redis
    is not sent again (a dead Redis holds one worker at most), and a target that did not answer
    last time is not waited for (it counts again once its answer is in)."""

    def __init__(
        self, leaders: Mapping[str, Leader], order: list[str], lease_ms: int, replica: str
    ) -> None:
        self.leaders = leaders
        self.order = order
        self.lease_ms = lease_ms
        self.replica = replica
        self.pool: ThreadPoolExecutor | None = None
        self._down: set[str] = set()
        self._inflight: dict[str, Future[Visit | None]] = {}
        self._errors: dict[str, str] = {}  # the last failure's class, for the log
        #: What a target's Redis refused the heartbeat (an ACL without ZCARD, say), for `/healthz`.
        self.refused: dict[str, str] = {}

    def round(self) -> dict[str, Visit]:
        """Heartbeat and renew on every target; those that answered within a third of the lease
        (or, not waited for, to the last beat's visit)."""
        pool = self.pool or ThreadPoolExecutor(min(len(self.order), MAX_WORKERS))
        try:
            late: dict[str, Visit | None] = {}
            for name in self.order:
                f = self._inflight.get(name)
                if f is not None and f.done():
                    late[name] = f.result()
                if f is None or f.done():
                    self._inflight[name] = pool.submit(self._visit, name)
            awaited = [self._inflight[n] for n in self.order if n not in self._down]
            wait(awaited, timeout=self.lease_ms / 3000)
        finally:
            if pool is not self.pool:
                pool.shutdown(wait=False)
        out = {}
        for name in self.order:
            f = self._inflight[name]
            visit = f.result() if f.done() else late.get(name)
            if visit is not None:
                out[name] = visit
        self._note({n for n in self.order if n not in out})
        return out

    def _note(self, down: set[str]) -> None:
        """Log each target that stops or starts answering."""
        for name in sorted(down - self._down):
            logs.event(
                _log,
                "fleet_target_unreachable",
                logging.WARNING,
                target=name,
                error=self._errors.get(name, "no answer in time"),
            )
        for name in sorted(self._down - down):
            logs.event(_log, "fleet_target_reachable", target=name)
        self._down = down

    def _visit(self, name: str) -> Visit | None:
        """None: it did not answer."""
        leader = self.leaders[name]
        client = leader.client
        try:
            now = server_ms(client)
            with client.pipeline(transaction=False) as pipe:
                pipe.zadd(REPLICAS, {self.replica: now + self.lease_ms})
                pipe.zremrangebyscore(REPLICAS, "-inf", now)
                pipe.zcard(REPLICAS)
                pipe.pexpire(REPLICAS, 2 * self.lease_ms)
                pipe.pttl(LEADER)
                _, _, live, _, ttl = pipe.execute()
        except redis.ResponseError as exc:
            self._errors[name] = type(exc).__name__
            self.refused[name] = str(refusal(exc, "this target", str))[:REFUSAL_TEXT]
            return None
        except (redis.RedisError, RedisClusterException) as exc:
            self._errors[name] = type(exc).__name__
            return None
        self.refused.pop(name, None)
        leader.renew()  # nothing sent unless this replica holds it
        return Visit(max(int(live), 1), int(ttl))

    def take(self, name: str) -> bool:
        try:
            return self.leaders[name].try_acquire()
        except (redis.RedisError, RedisClusterException):
            return False

    def give_back(self, name: str) -> None:
        try:
            if self.leaders[name].release():
                logs.event(_log, "fleet_lease_given_back", target=name, replica=self.replica)
        except (redis.RedisError, RedisClusterException):
            pass  # it lapses by itself within one lease

    def leave(self, name: str) -> None:
        self.give_back(name)
        with suppress(redis.RedisError, RedisClusterException):  # else it lapses by itself
            self.leaders[name].client.zrem(REPLICAS, self.replica)


class Shards:
    """This replica's share of the fleet's leader leases, kept by one heartbeat thread."""

    def __init__(
        self,
        leaders: Mapping[str, Leader],
        *,
        lease_ms: int,
        replica: str,
    ) -> None:
        if not leaders:
            raise ValueError("a fleet has at least one target")
        self.leaders = dict(leaders)
        self.lease_ms = lease_ms
        self.replica = replica
        self.order = preference(list(self.leaders), replica)
        #: What the last beat saw: live replicas, and this replica's quota.
        self.replicas = 1
        self.quota = len(self.leaders)
        self._workers = min(MAX_WORKERS, len(self.leaders))
        self.visitor = Visitor(self.leaders, self.order, lease_ms, replica)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def held(self) -> list[str]:
        """The targets whose lease this replica holds now, in its order of preference."""
        return [n for n in self.order if self.leaders[n].is_leader()]

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping.clear()
        self.visitor.pool = ThreadPoolExecutor(self._workers, thread_name_prefix="lockguard-shards")
        self._thread = threading.Thread(target=self._run, name="lockguard-fleet", daemon=True)
        self._thread.start()

    def stop(self, *, release: bool = True) -> None:
        """Unless `release=False` (as a crash would), give every lease back and leave each
        target's `{lockguard}:replicas`, so the others take over at their next beat. Safe to
        call twice."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if not release:  # a visit still running must not renew a lease left to lapse
            for leader in self.leaders.values():
                leader.forget()
        pool, self.visitor.pool = self.visitor.pool or ThreadPoolExecutor(self._workers), None
        if release:  # at once on every target; a dead one is left to lapse after a lease
            done = [pool.submit(self.visitor.leave, n) for n in self.order]
            wait(done, timeout=self.lease_ms / 1000)
        pool.shutdown(wait=False)
        for leader in self.leaders.values():
            leader.stop(release=False)  # given back above: this tells the listeners

    def beat(self) -> float:
        """One round over the fleet; the seconds until the next."""
        started = time.monotonic()
        reachable = self.visitor.round()
        replicas = max((v.live for v in reachable.values()), default=1)
        share = quota(len(self.leaders), replicas)
        held = [n for n in self.order if n in reachable and self.leaders[n].is_leader()]
        for name in held[share:]:
            self.visitor.give_back(name)
        held = held[:share]
        for name in self.order:
            if len(held) >= share:
                break
            if name in held or name not in reachable or reachable[name].lease_ttl_ms != -2:
                continue
            if self.visitor.take(name):
                held.append(name)
        if (replicas, share) != (self.replicas, self.quota):
            logs.event(_log, "fleet_share", replica=self.replica, replicas=replicas, quota=share)
        self.replicas, self.quota = replicas, share
        for leader in self.leaders.values():
            leader.notify()
        return max(self._wait(reachable, set(held)) - (time.monotonic() - started), MIN_WAIT_S)

    def _wait(self, reachable: Mapping[str, Visit], held: set[str]) -> float:
        """Every lease/3, or just after a lease another replica holds would lapse."""
        wait = self.lease_ms / 3000
        for name, visit in reachable.items():
            if name not in held and visit.lease_ttl_ms >= 0:  # PTTL 0: it lapses within 1 ms
                wait = min(wait, visit.lease_ttl_ms / 1000 + 0.005)
        return max(wait, MIN_WAIT_S)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                wait = self.beat()
            except Exception as exc:  # a bug: the next beat tries again
                logs.event(
                    _log,
                    "fleet_beat_failed",
                    logging.ERROR,
                    error=f"{type(exc).__name__}: {exc}"[:300],
                )
                wait = self.lease_ms / 3000
            self._stopping.wait(wait)
