"""Scanning a Redis Cluster: every primary at once, each with its own SCAN, in the same batches.

SCAN walks one node, so each primary is scanned as `Scanner` scans one server: its batch script
(`CLUSTER_READ_LUA`, Redis 7's `allow-cross-slot-keys`; where scripting is refused or older, the
pipelined read) reads every key's previous lease record from the node's own lease table with one
HMGET, and the scan writes each batch back with one HSET (`bot.store.lease_plan`). The nodes'
batches are taken in turn, on one thread: each node has its next batch read in flight while the
others' are classified, so the primaries work in parallel.

Slots that moved (the batch script flags keys outside the node's slots of the scan's start):
- since the last scan: the previous record is read from the table the last plan gave the slot,
  through the cluster client;
- during this scan: a key that arrived on a node is checked against, and written to, the table
  this scan's plan gave its slot, so it is counted once and every slot's records stay in one
  table. A node that gained a slot (seen in its keys, in keys it could not serve yet because the
  slot was still being imported, or in the slot map once every node is done) is scanned once
  more from cursor 0, since SCAN only promises keys that stay put; keys already written are
  skipped as repeats. After `MAX_PASSES` over one node the scan stops (exit 3), as it does when
  a slot lands on a primary it did not start with, or a node fails: nothing is recorded, the
  history in force is kept, and the next scan starts again. The pipelined read has no flags:
  there the scanner looks up every key's slot itself, and counts a key the node redirects (MOVED,
  ASK: its slot still being imported) as moving, the same way.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import redis
from redis.cluster import RedisCluster
from redis.typing import EncodableT

from bot.core.errors import ScanInterruptedError
from bot.scan.batch_script import CLUSTER_READ_LUA
from bot.scan.reader import ReadMode, Scanner
from bot.scan.types import MAX_FIELDS, MAX_VALUE_BYTES, Batch, ScanStats
from bot.store import lease_plan, slots
from bot.store.connection import describe

#: SCANs of one node within one scan, when slots keep moving to it, before the scan gives up.
MAX_PASSES = 4
#: Wait before scanning a node again while a slot is being resharded to it, x the passes so far.
PASS_WAIT_S = 0.5


@dataclass(slots=True)
class _Node:
    name: str  # host:port
    client: redis.Redis
    index: int  # this scan's table of the node, in the plan
    new_table: bytes
    prev_table: bytes  # the previous table on this node holding most of its slots' records
    prev_index: int  # its index in the previous plan (-1: none)
    exact: bool  # every slot of the node has its previous records in prev_table (or none)
    scanner: _NodeScanner
    passes: int = 0  # SCANs of the node begun in this scan
    again: bool = False  # slots moved to the node during this pass: scan it once more
    moving_seen: int = 0  # keys of slots being resharded, as of the last batch
    arrived: set[int] = field(default_factory=set)  # slots seen moving to the node
    known: set[int] = field(default_factory=set)  # of those, the ones there as this pass began


class ClusterScanner:
    """The `bot.scan.Scanner` of a Redis Cluster: `batches`, then `write_leases` for each
    batch before asking for the next. Built once `bot.store.scans.begin_scan` holds the scan lease:
    it plans generation `gen + 1` from the slot map of now (and saves the plan) and scans the
    primaries of that plan."""

    def __init__(
        self,
        client: RedisCluster,
        gen: int,
        *,
        count: int = 1000,
        mode: ReadMode = ReadMode.AUTO,
        max_fields: int = MAX_FIELDS,
        max_value_bytes: int = MAX_VALUE_BYTES,
    ) -> None:
        self.client = client
        self.stats = ScanStats()
        client.nodes_manager.initialize()  # the slots of now
        self.plan, self.prev = lease_plan.make(client, gen + 1), lease_plan.load(client, gen)
        lease_plan.save(client, self.plan)  # before any table of it is written
        # A primary that served no slot when the plan was made (one just added, not yet given
        # slots) holds no key to scan: a slot moving to it mid-scan stops the scan (`_gained`).
        self.nodes = [
            self._node(name, c, count, mode, max_fields, max_value_bytes)
            for name, c in slots.primaries(client)
            if name in self.plan.nodes
        ]
        self._last: _Node | None = None
        self._redirect: dict[bytes, bytes] = {}  # last batch: key -> the table it goes to
        self._foreign: set[bytes] = set()  # keys taken from a node their slot moved to
        self._handled: dict[int, str] = {}  # slot -> the primary it moved to, seen at the end

    @property
    def mode(self) -> ReadMode:
        lua = all(n.scanner.mode is ReadMode.LUA for n in self.nodes)
        return ReadMode.LUA if lua else ReadMode.PIPELINE

    def _node(
        self,
        name: str,
        client: redis.Redis,
        count: int,
        mode: ReadMode,
        max_fields: int,
        max_value_bytes: int,
    ) -> _Node:
        plan, prev = self.plan, self.prev
        index = plan.nodes.index(name)
        mine = [s for s in range(slots.SLOTS) if plan.owners[s] == index]
        prev_table, prev_index, exact = slots.lease_table(plan.gen - 1, min(mine)), -1, True
        if prev is not None:
            counts: dict[int, int] = {}
            for s in mine:
                counts[prev.owners[s]] = counts.get(prev.owners[s], 0) + 1
            local = [
                j
                for j in counts
                if j != lease_plan.NO_TABLE and plan.owners[prev.tables[j]] == index
            ]
            if local:
                prev_index = max(local, key=counts.__getitem__)
                prev_table = prev.table(prev_index)
            exact = counts.get(prev_index, 0) == len(mine)
        new_table = plan.table(index)
        plain = bytearray(slots.SLOTS // 8)  # mine, with the records in prev_table (or none)
        for s in mine:
            if prev is None or prev.owners[s] == prev_index:
                plain[s >> 3] |= 1 << (s & 7)
        scanner = _NodeScanner(
            client,
            new_table,
            bytes(plain),
            count=count,
            mode=mode,
            max_fields=max_fields,
            max_value_bytes=max_value_bytes,
        )
        return _Node(name, client, index, new_table, prev_table, prev_index, exact, scanner)

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
                        self._note_moving(node)
                        again = [node] if node.again else [] if running else self._gained()
                        for n in again:  # slots moved to it during its pass: once more
                            running[n.name] = (n, self._pass(n, patterns))
                        continue
                    except redis.RedisError as exc:
                        raise _node_failed(node, exc) from None
                    self._last, self.stats.pattern = node, node.scanner.stats.pattern
                    try:
                        batch = self._settle(node, batch, node.scanner.moved)
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
    def _note_moving(node: _Node) -> None:
        """Keys of a slot being resharded to the node were skipped (in any batch, even one
        left empty): scan it once more when this pass ends."""
        if node.scanner.stats.moving > node.moving_seen:
            node.moving_seen, node.again = node.scanner.stats.moving, True

    def _pass(self, node: _Node, patterns: list[bytes]) -> Generator[Batch, None, None]:
        """One SCAN of the node from cursor 0: the first, or again because slots moved to it
        during the last (keys already written are skipped as repeats)."""
        if node.passes >= MAX_PASSES:
            raise ScanInterruptedError(
                f"the scan stopped: slots kept moving to cluster node {node.name} while it ran "
                f"({MAX_PASSES} passes over it), so it may have missed locks; nothing was "
                "recorded and the lease history is kept: the next scan starts again"
            )
        if node.again and node.scanner.stats.moving:
            time.sleep(PASS_WAIT_S * node.passes)  # a slot being resharded: let the move end
        node.passes += 1
        node.again = False
        node.known = set(node.arrived)
        return node.scanner.batches(patterns, node.prev_table, node.new_table)

    def _gained(self) -> list[_Node]:
        """Once every node is done: the nodes that gained slots since the scan started (and
        not seen before), to be scanned again; a slot now on a primary the plan does not know
        (a replica promoted, a node added) stops the scan."""
        self.client.nodes_manager.initialize()
        now = lease_plan.make(self.client, self.plan.gen)
        by_name = {n.name: n for n in self.nodes}
        gained: dict[str, _Node] = {}
        for s in range(slots.SLOTS):
            owner = now.node_of(s)
            if owner in ("", self.plan.node_of(s)) or self._handled.get(s) == owner:
                continue
            self._handled[s] = owner
            if owner not in by_name:
                raise ScanInterruptedError(
                    f"the scan stopped: slot {s} moved to cluster node {owner} while it ran, a "
                    "primary it did not start with; nothing was recorded and the lease history "
                    "is kept: the next scan starts again"
                )
            gained[owner] = by_name[owner]
        return list(gained.values())

    def write_leases(self, records: dict[bytes, bytes]) -> None:
        """The lease records of the batch last yielded: into its node's table, and a key whose
        slot moved to that node during the scan into the table planned for its slot."""
        node = self._last
        if not records or node is None:
            return
        try:
            if self._redirect:
                records = dict(records)
                with self.client.pipeline(transaction=False) as pipe:
                    for k, table in self._redirect.items():
                        if k in records:
                            pipe.hset(table, k, records.pop(k))
                    pipe.execute()
            if records:
                node.client.hset(
                    node.new_table, mapping=cast("dict[EncodableT, EncodableT]", records)
                )
        except redis.RedisError as exc:
            raise _node_failed(node, exc) from None

    # -- keys whose slot moved -----------------------------------------------------------------

    def _settle(self, node: _Node, batch: Batch, moved_keys: set[bytes] | None) -> Batch:
        """The batch with keys of moved slots put right: a key of a slot this node did not have
        when the scan started (it moved here since) is checked against, and later written to,
        the table planned for its slot; a key whose slot was elsewhere at the last scan has its
        previous record read from that scan's table for it. `moved_keys`: the keys the batch
        script found in such slots (None: look at every key)."""
        self._redirect = {}
        if moved_keys is not None and not moved_keys and not self._foreign:
            return batch
        owners, index, slot_of = self.plan.owners, node.index, slots.slot_of
        prev_owners = None if node.exact or self.prev is None else self.prev.owners
        foreign = self._foreign
        out: Batch = []
        moved: list[tuple[int, int]] = []  # (position in out, slot): read the record elsewhere
        arrived: list[tuple[int, int]] = []  # (position in out, slot): moved here mid-scan
        for snap, record in batch:
            if (
                moved_keys is not None
                and snap.key not in moved_keys
                and not (foreign and snap.key in foreign)
            ):
                out.append((snap, record))
                continue
            slot = slot_of(snap.key)
            if owners[slot] != index:
                arrived.append((len(out), slot))
            elif foreign and snap.key in foreign:
                node.scanner.stats.duplicates += 1
                continue
            elif (
                prev_owners is not None and record is None and prev_owners[slot] != node.prev_index
            ):
                moved.append((len(out), slot))
            out.append((snap, record))
        if not moved and not arrived:
            return out
        prev = self.prev
        with self.client.pipeline(transaction=False) as pipe:
            for i, slot in moved + arrived:
                if prev is not None:
                    pipe.hget(prev.table_of(slot), out[i][0].key)
            for i, slot in arrived:
                pipe.hexists(self.plan.table_of(slot), out[i][0].key)
            replies: list[Any] = pipe.execute()
        n_prev = len(moved) + len(arrived) if prev is not None else 0
        for (i, _), record in zip(moved + arrived, replies[:n_prev], strict=True):
            out[i] = (out[i][0], record)
        drop = set()
        for (i, slot), done in zip(arrived, replies[n_prev:], strict=True):
            key = out[i][0].key
            if done or key in foreign:
                drop.add(i)
                node.scanner.stats.duplicates += 1
            else:
                foreign.add(key)
                self._redirect[key] = self.plan.table_of(slot)
        if any(slot not in node.known for _, slot in arrived):
            node.again = True  # this pass may have passed where the slot's keys landed
            node.arrived.update(slot for _, slot in arrived)
        return [x for i, x in enumerate(out) if i not in drop] if drop else out


class _NodeScanner(Scanner):
    """`Scanner` on one primary: `CLUSTER_READ_LUA` (the tables passed as ARGV), probed with the
    node's own table; in AUTO mode any refusal of the probe (an older server cannot compile the
    script's flags) means pipelined reads."""

    _SCRIPT = CLUSTER_READ_LUA

    def __init__(
        self, client: redis.Redis, probe_table: bytes, plain: bytes, **kwargs: Any
    ) -> None:
        self.probe_table, self.plain = probe_table, plain
        self.moved: set[bytes] | None = None  # the last Lua batch's keys of moved slots
        super().__init__(client, **kwargs)

    def _probe_keys(self) -> list[bytes]:
        return [self.probe_table, self.probe_table]

    def _request(
        self, pattern: bytes, prev_table: bytes, new_table: bytes
    ) -> tuple[list[bytes], list[EncodableT]]:
        keys, args = super()._request(pattern, prev_table, new_table)
        return [], [*args, *keys, self.plain]

    def _parse_lua(self, reply: list[Any], in_hand: set[bytes]) -> Batch:
        self.moved = set(reply[9]) if reply[9] else set()
        return super()._parse_lua(reply, in_hand)

    def _choose_mode(self, mode: ReadMode) -> ReadMode:
        try:
            return super()._choose_mode(mode)  # probes in AUTO mode only
        except redis.ResponseError:  # e.g. Redis < 7 cannot compile the script's flags
            return ReadMode.PIPELINE


def _add(total: ScanStats, part: ScanStats) -> None:
    total.scan_calls += part.scan_calls
    total.keys_returned += part.keys_returned
    total.duplicates += part.duplicates
    total.vanished += part.vanished
    total.own_keys_skipped += part.own_keys_skipped
    total.moving += part.moving


def _node_failed(node: _Node, exc: BaseException) -> BaseException:
    if not isinstance(exc, redis.RedisError):
        return exc
    err = describe(exc, f"cluster node {node.name}")
    return type(err)(
        f"the scan stopped: {err}; nothing was recorded and the lease history "
        "is kept: the next scan starts again"
    )
