"""Scanning a Redis Cluster: every primary at once, each with its own SCAN, in the same batches.

SCAN walks one node, so each primary is scanned as one server is (`bot.scan.cluster_node`),
reading and writing its own tenure table (`bot.store.tenure_plan`). The nodes' batches are taken
in turn on one thread, each node's next reads in flight meanwhile, so the primaries work in
parallel. A paced scan writes each batch's records before the node's next batch: that round trip
keeps each primary's queue of lockguard's calls short (the application's p99, bench/README.md).
Unpaced, in Lua mode, they are written `WRITE_EVERY` at a time. Every node's records are written
before keys of moved slots are looked up (`bot.scan.slot_moves`), so a moved key counts once.

A node that gained a slot is scanned again from cursor 0 (SCAN only promises keys that stay
put). After `MAX_PASSES` over one node, a slot on a primary the scan did not start with, or a
node failing, the scan stops (exit 3): nothing is recorded and the history in force is kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable

import redis
from redis.cluster import RedisCluster

from bot.core.errors import ScanInterruptedError
from bot.core.pacing import Pacer, unpaced
from bot.scan.cluster_node import Node, planned_node
from bot.scan.scanner import ReadMode
from bot.scan.slot_moves import SlotMoves
from bot.scan.types import MAX_FIELDS, MAX_VALUE_BYTES, Batch, ScanStats
from bot.store import scans, slots, tenure_plan
from bot.store.connection import describe

#: SCANs of one node within one scan, when slots keep moving to it, before the scan gives up.
MAX_PASSES = 4
#: Wait before scanning a node again while a slot is being resharded to it, x the passes so far.
PASS_WAIT_S = 0.5
#: Tenure records of one node collected before they are written, unpaced in Lua mode.
WRITE_EVERY = 1000


class ClusterScanner:
    """The `Scanner` of a Redis Cluster: `batches`, then `write_tenures` for each batch before
    the next. Built once the scan lease is held: it plans and saves generation `gen + 1`."""

    def __init__(
        self,
        client: RedisCluster,
        gen: int,
        *,
        count: int = 1000,
        mode: ReadMode = ReadMode.AUTO,
        max_fields: int = MAX_FIELDS,
        max_value_bytes: int = MAX_VALUE_BYTES,
        pacer: Callable[[], Pacer] = unpaced,
    ) -> None:
        self.client = client
        self.stats = ScanStats()
        client.nodes_manager.initialize()  # the slots of now
        self.plan, self.prev = tenure_plan.make(client, gen + 1), tenure_plan.load(client, gen)
        tenure_plan.save(client, self.plan)  # before any table of it is written
        # A primary with no slot in the plan holds no key: a slot moving to it stops the scan.
        self.nodes = [
            planned_node(
                self.plan,
                self.prev,
                name,
                c,
                count=count,
                mode=mode,
                max_fields=max_fields,
                max_value_bytes=max_value_bytes,
                pacer=pacer(),
            )
            for name, c in slots.primaries(client)
            if name in self.plan.nodes
        ]
        self.moves = SlotMoves(client, self.plan, self.prev)
        self._last: Node | None = None
        for n in self.nodes:  # unpaced, in Lua mode: records written WRITE_EVERY at a time
            n.scanner.deferred = n.scanner.pacer is None or not n.scanner.pacer.paced

    @property
    def mode(self) -> ReadMode:
        lua = all(n.scanner.mode is ReadMode.LUA for n in self.nodes)
        return ReadMode.LUA if lua else ReadMode.PIPELINE

    def batches(self, patterns: Iterable[bytes]) -> Generator[Batch, None, None]:
        patterns = list(patterns)
        running = {n.name: (n, self._pass(n, patterns)) for n in self.nodes}
        try:
            while running:
                for node, batches in list(running.values()):
                    try:
                        batch = next(batches)
                    except StopIteration:
                        del running[node.name]
                        _write(node)  # the rest of its records
                        self._note_moving(node)
                        again = [node] if node.again else []
                        if not again and not running:  # every node done: any gained slots?
                            again = self.moves.gained(self.nodes)
                        for n in again:  # slots moved to it during its pass: once more
                            running[n.name] = (n, self._pass(n, patterns))
                        continue
                    except redis.RedisError as exc:
                        raise _node_failed(node, exc) from None
                    self._last, self.stats.pattern = node, node.scanner.stats.pattern
                    try:
                        if self.moves.looks_up(node.scanner.moved):
                            for n in self.nodes:  # its keys are checked against the tables
                                _write(n)
                        batch = self.moves.settle(node, batch, node.scanner.moved)
                    except redis.RedisError as exc:
                        raise _node_failed(node, exc) from None
                    self._note_moving(node)
                    yield batch
        finally:
            for _, batches in running.values():
                batches.close()
            for n in self.nodes:
                _add(self.stats, n.scanner.stats)
                n.scanner.stats = ScanStats()

    @staticmethod
    def _note_moving(node: Node) -> None:
        """Keys of a slot being resharded to the node were skipped: scan it once more."""
        if node.scanner.stats.moving > node.moving_seen:
            node.moving_seen, node.again = node.scanner.stats.moving, True

    def _pass(self, node: Node, patterns: list[bytes]) -> Generator[Batch, None, None]:
        """One SCAN of the node from cursor 0 (again: keys already written are repeats)."""
        if node.passes >= MAX_PASSES:
            raise ScanInterruptedError(
                f"the scan stopped: slots kept moving to cluster node {node.name} while it ran "
                f"({MAX_PASSES} passes over it), so it may have missed locks; nothing was "
                "recorded and the tenure history is kept: the next scan starts again"
            )
        if node.again and node.scanner.stats.moving:
            time.sleep(PASS_WAIT_S * node.passes)  # a slot being resharded: let the move end
        node.passes += 1
        node.again = False
        node.known = set(node.arrived)
        return node.scanner.batches(patterns, node.prev_table, node.new_table)

    def write_tenures(self, records: dict[bytes, bytes]) -> None:
        """The records of the batch last yielded, into its node's table (a deferred node: once
        WRITE_EVERY are pending); a key whose slot moved here, into its slot's table now."""
        node = self._last
        if not records or node is None:
            return
        if self.moves.redirect:
            records = _write_redirected(self.client, self.moves.redirect, node, records)
        node.pending.update(records)
        deferred = node.scanner.deferred and node.scanner.mode is ReadMode.LUA
        if not deferred or len(node.pending) >= WRITE_EVERY:
            _write(node)


def _write_redirected(
    client: RedisCluster, redirect: dict[bytes, bytes], node: Node, records: dict[bytes, bytes]
) -> dict[bytes, bytes]:
    """The records of keys whose slot moved to `node` written where `redirect` says; the rest."""
    started, records = time.perf_counter(), dict(records)
    try:
        with client.pipeline(transaction=False) as pipe:
            for k, table in redirect.items():
                if k in records:
                    pipe.hset(table, k, records.pop(k))
            pipe.execute()
    except redis.RedisError as exc:
        raise _node_failed(node, exc) from None
    _paced(node, started)
    return records


def _write(node: Node) -> None:
    """The node's pending records into its table (in short HSETs, one round trip)."""
    if not node.pending:
        return
    started = time.perf_counter()
    try:
        scans.write_table(node.client, node.new_table, node.pending)
    except redis.RedisError as exc:
        raise _node_failed(node, exc) from None
    node.pending = {}
    node.scanner.written()
    _paced(node, started)


def _paced(node: Node, started: float) -> None:
    if node.scanner.pacer is not None:  # the node's own budget, by the round trip
        node.scanner.pacer.pause(time.perf_counter() - started)


def _add(total: ScanStats, part: ScanStats) -> None:
    total.scan_calls += part.scan_calls
    total.keys_returned += part.keys_returned
    total.duplicates += part.duplicates
    total.vanished += part.vanished
    total.own_keys_skipped += part.own_keys_skipped
    total.moving += part.moving
    total.skipped_oversized(part.oversized, part.oversized_keys)


def _node_failed(node: Node, exc: BaseException) -> BaseException:
    if not isinstance(exc, redis.RedisError):
        return exc
    err = describe(exc, f"cluster node {node.name}")
    return type(err)(
        f"the scan stopped: {err}; nothing was recorded and the tenure history "
        "is kept: the next scan starts again"
    )
