"""Scanning a Redis Cluster: every primary at once, each with its own SCAN, in the same batches.

SCAN walks one node, so each primary gets a thread of its own that scans it as `Scanner` scans
one server (one Lua batch read in flight while the last is classified), and the caller takes the
batches of all nodes as they come (one queue). The batch read is `CLUSTER_SCAN_LUA` (Redis 7:
`allow-cross-slot-keys`, since a node's keys are in many slots) or, where scripting is refused
or older than Redis 7, the pipelined read; either way each key's lease history comes from the
tables in its own slot (`bot.slots`), so it moves with the slot when the cluster is resharded
and stays with it when a replica takes over.

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
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.typing import EncodableT

from bot import slots
from bot.connection import describe
from bot.keyspace import LEGACY_PREFIX, PREFIX, SLOT_PREFIX
from bot.scanner.batch_script import CLUSTER_SCAN_LUA, CLUSTER_WRITE_LUA
from bot.scanner.pipelined import PipelinedReader
from bot.scanner.reader import ReadMode, Scanner
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
            try:  # one empty batch: a pattern no key has
                node.client.eval(CLUSTER_SCAN_LUA, 0, 0, PREFIX + b"probe", 1, 1, 1, 0, 0,
                                 PREFIX, LEGACY_PREFIX, SLOT_PREFIX, 0, 1)
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
        self._gens = (prev_gen, new_gen)
        prev: list[bytes] = []  # the pipelined reads name every key's tables in Python
        new: list[bytes] = []
        if self.mode is ReadMode.PIPELINE:
            prev = [slots.lease_table(prev_gen, s) for s in range(slots.SLOTS)]
            new = [slots.lease_table(new_gen, s) for s in range(slots.SLOTS)]
        self._new = new
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
                args: list[EncodableT] = [SLOT_PREFIX, self._gens[1]]
                for k, rec in records.items():
                    args += (k, rec)
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
            scanner = _NodeScanner(node.client, self._gens, count=self.count,
                                   max_fields=self.max_fields,
                                   max_value_bytes=self.max_value_bytes)
            scanner.stats = node.stats
            return scanner.batches([pattern], b"", b"")
        slot_of = slots.slot_of

        def tables(k: bytes) -> tuple[bytes, bytes]:
            s = slot_of(k)
            return prev[s], new[s]

        reader = PipelinedReader(node.client, node.stats, count=self.count,
                                 max_fields=self.max_fields,
                                 max_value_bytes=self.max_value_bytes, tables=tables)
        return reader.batches([pattern], b"", b"")


class _NodeScanner(Scanner):
    """`Scanner`'s Lua reads on one primary, with `CLUSTER_SCAN_LUA`: no KEYS, and the two lease
    generations instead of two tables (the script names each key's tables in its slot)."""

    _SCRIPT = CLUSTER_SCAN_LUA

    def __init__(self, client: redis.Redis, gens: tuple[int, int], **kwargs: Any) -> None:
        self.gens = gens
        super().__init__(client, mode=ReadMode.LUA, **kwargs)

    def _request(self, pattern: bytes, prev_table: bytes,
                 new_table: bytes) -> tuple[list[bytes], list[EncodableT]]:
        _, args = super()._request(pattern, prev_table, new_table)
        return [], [*args, *self.gens]


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

