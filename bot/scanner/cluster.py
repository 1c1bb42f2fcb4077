"""Scanning a Redis Cluster: every primary at once, each with its own SCAN, in the same batches.

SCAN walks one node, so each primary gets a thread of its own that SCANs it and reads what it
found in batches, and the caller takes the batches of all nodes as they come (one queue). Per
node and batch, in one round trip: the batch read of the keys the last SCAN returned and the next
SCAN. The read is `CLUSTER_READ_LUA` (Redis 7: `allow-cross-slot-keys`, since a node's keys are
in many slots) or, where scripting is refused or older than Redis 7, the pipelined read; either
way each key's lease history comes from the tables in its own slot (`bot.slots`), so it moves with
the slot when the cluster is resharded and stays with it when a replica takes over.

Repeats are skipped as on one server: keys already in this scan's tables, and keys of the node's
last few batches (read before the caller wrote them). A node that fails ends the scan with an
error naming it (exit 3); nothing is recorded, the previous lease history stays in force, and the
next scan starts again.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Generator, Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, cast

import redis
from redis.cluster import RedisCluster
from redis.typing import EncodableT

from bot import slots
from bot.connection import describe
from bot.keyspace import OWN_PREFIXES
from bot.scanner.batch_script import CLUSTER_READ_LUA, CLUSTER_WRITE_LUA
from bot.scanner.pipelined import PipelinedReader
from bot.scanner.reader import ReadMode
from bot.scanner.reply import parse_reply
from bot.scanner.types import MAX_FIELDS, MAX_VALUE_BYTES, Batch, ScanStats

#: Batches waiting for the caller (all nodes together); a node's thread reads ahead at most this.
QUEUE = 4
#: A node's batches still possibly unwritten when it reads the next: their keys are skipped.
WINDOW = QUEUE + 2


@dataclass(slots=True)
class _Node:
    name: str  # host:port
    client: redis.Redis
    write: Any  # CLUSTER_WRITE_LUA registered on this node's client
    stats: ScanStats = field(default_factory=ScanStats)


class ClusterScanner:
    """The `bot.scanner.Scanner` of a Redis Cluster: `batches`, then `write_leases` for each
    batch before asking for the next. It scans the primaries of the client's slot map, which
    `bot.store.begin_scan` has just refreshed."""

    def __init__(self, client: RedisCluster, *, count: int = 1000, mode: ReadMode = ReadMode.AUTO,
                 max_fields: int = MAX_FIELDS, max_value_bytes: int = MAX_VALUE_BYTES) -> None:
        self.client = client
        self.count = count
        self.max_fields = max_fields
        self.max_value_bytes = max_value_bytes
        self.nodes = [_Node(name, c, c.register_script(CLUSTER_WRITE_LUA))
                      for name, c in slots.primaries(client)]
        self.stats = ScanStats()
        self.mode = self._choose_mode(mode)
        self._last: _Node | None = None
        self._new: list[bytes] = []

    def _choose_mode(self, mode: ReadMode) -> ReadMode:
        """AUTO: lua when every primary runs the cluster read script (Redis 7+, scripting
        allowed), else pipelined reads everywhere."""
        if mode is ReadMode.PIPELINE:
            return mode
        for node in self.nodes:
            try:
                node.client.eval(CLUSTER_READ_LUA, 0, 0, 0)
            except redis.ResponseError as exc:
                if mode is ReadMode.LUA:
                    exc.lockguard_hint = (  # type: ignore[attr-defined]
                        "on a Redis Cluster the lua read mode needs Redis 7+ (script flags) "
                        "and scripting; --read-mode auto falls back to pipelined reads")
                    raise
                return ReadMode.PIPELINE
        return ReadMode.LUA

    def batches(self, patterns: Iterable[bytes], prev_gen: int,
                new_gen: int) -> Generator[Batch, None, None]:
        prev = [slots.lease_table(prev_gen, s) for s in range(slots.SLOTS)]
        self._new = new = [slots.lease_table(new_gen, s) for s in range(slots.SLOTS)]
        patterns = list(patterns)
        found: queue.Queue[tuple[str, _Node, bytes, Any]] = queue.Queue(QUEUE)
        stop = threading.Event()
        threads = [threading.Thread(target=self._work, args=(n, patterns, prev, new, found, stop),
                                    name=f"lockguard-scan-{n.name}", daemon=True)
                   for n in self.nodes]
        for t in threads:
            t.start()
        try:
            live = len(threads)
            while live:
                kind, node, pattern, payload = found.get()
                if kind == "done":
                    live -= 1
                elif kind == "error":
                    raise _node_failed(node, payload)
                else:
                    self.stats.pattern, self._last = pattern, node
                    yield payload
        finally:
            stop.set()
            while any(t.is_alive() for t in threads):
                with suppress(queue.Empty):
                    found.get(timeout=0.05)  # unblock a thread waiting to hand over a batch
            for n in self.nodes:
                _add(self.stats, n.stats)
                n.stats = ScanStats()

    def write_leases(self, records: dict[bytes, bytes]) -> None:
        """The lease records of the batch last yielded, into its node's per-slot tables."""
        node = self._last
        if not records or node is None:
            return
        new, slot_of = self._new, slots.slot_of
        try:
            if self.mode is ReadMode.LUA:
                args: list[EncodableT] = []
                for k, rec in records.items():
                    args += (new[slot_of(k)], k, rec)
                node.write(args=args)
                return
            with node.client.pipeline(transaction=False) as pipe:
                for k, rec in records.items():
                    pipe.hset(new[slot_of(k)], k, rec)
                pipe.execute()
        except redis.RedisError as exc:
            raise _node_failed(node, exc) from None

    # -- one node ----------------------------------------------------------------------------

    def _work(self, node: _Node, patterns: list[bytes], prev: list[bytes], new: list[bytes],
              found: queue.Queue[tuple[str, _Node, bytes, Any]], stop: threading.Event) -> None:
        def hand(item: tuple[str, _Node, bytes, Any]) -> bool:
            while not stop.is_set():
                try:
                    found.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        recent: deque[set[bytes]] = deque(maxlen=WINDOW)
        try:
            for pattern in patterns:
                for batch in self._node_batches(node, pattern, prev, new):
                    if recent:
                        kept = [x for x in batch if not any(x[0].key in r for r in recent)]
                        node.stats.duplicates += len(batch) - len(kept)
                        batch = kept
                    recent.append({snap.key for snap, _ in batch})
                    if batch and not hand(("batch", node, pattern, batch)):
                        return
                    if stop.is_set():
                        return
            hand(("done", node, b"", None))
        except Exception as exc:  # handed to the caller, which raises it naming the node
            hand(("error", node, b"", exc))

    def _node_batches(self, node: _Node, pattern: bytes, prev: list[bytes],
                      new: list[bytes]) -> Iterable[Batch]:
        if self.mode is ReadMode.LUA:
            return self._lua_batches(node, pattern, prev, new)
        slot_of = slots.slot_of

        def tables(k: bytes) -> tuple[bytes, bytes]:
            s = slot_of(k)
            return prev[s], new[s]

        reader = PipelinedReader(node.client, node.stats, count=self.count,
                                 max_fields=self.max_fields,
                                 max_value_bytes=self.max_value_bytes, tables=tables)
        return reader.batches([pattern], b"", b"")

    def _lua_batches(self, node: _Node, pattern: bytes, prev: list[bytes],
                     new: list[bytes]) -> Generator[Batch, None, None]:
        client, stats, slot_of = node.client, node.stats, slots.slot_of
        sha = client.register_script(CLUSTER_READ_LUA).sha
        cursor, found = client.scan(0, match=pattern, count=self.count)
        stats.scan_calls += 1
        while True:
            keys = _unique(cast("list[bytes]", found), stats)
            args: list[EncodableT] = [self.max_fields, self.max_value_bytes]
            for k in keys:
                s = slot_of(k)
                args += (k, prev[s], new[s])
            with client.pipeline(transaction=False) as pipe:
                if keys:
                    pipe.execute_command("EVALSHA", sha, 0, *args)
                if cursor != 0:
                    pipe.scan(cursor, match=pattern, count=self.count)
                replies = pipe.execute(raise_on_error=False)
            if keys:
                reply = replies[0]
                if isinstance(reply, redis.exceptions.NoScriptError):  # a restart, a failover
                    reply = client.eval(CLUSTER_READ_LUA, 0, *args)
                elif isinstance(reply, Exception):
                    raise reply
                batch = parse_reply(reply, set(), stats, self.max_fields)
                if batch:
                    yield batch
            if cursor == 0:
                return
            if isinstance(replies[-1], Exception):
                raise replies[-1]
            cursor, found = replies[-1]
            stats.scan_calls += 1


def _unique(found: list[bytes], stats: ScanStats) -> list[bytes]:
    """A SCAN reply's keys, once each, without lockguard's own."""
    stats.keys_returned += len(found)
    unique = dict.fromkeys(found)
    own = [k for k in unique if k.startswith(OWN_PREFIXES)]
    stats.own_keys_skipped += len(own)
    stats.duplicates += len(found) - len(unique)
    for k in own:
        del unique[k]
    return list(unique)


def _add(total: ScanStats, part: ScanStats) -> None:
    total.scan_calls += part.scan_calls
    total.keys_returned += part.keys_returned
    total.duplicates += part.duplicates
    total.vanished += part.vanished
    total.own_keys_skipped += part.own_keys_skipped


def _node_failed(node: _Node, exc: BaseException) -> BaseException:
    if not isinstance(exc, redis.RedisError):
        return exc
    err = describe(exc, f"cluster node {node.name}")
    return type(err)(f"the scan stopped: {err}; nothing was recorded and the lease history "
                     "is kept: the next scan starts again")

