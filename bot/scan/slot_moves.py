"""Keys whose slot moved, within one Redis Cluster scan (`bot.scan.cluster_scanner`).

Moved since the last scan: the previous record is read from the table the last plan gave the
slot. Moving during this scan: an arrived key is checked against, and written to, the table this
scan's plan gave its slot, so it is counted once and each slot's records stay in one table; its
node is scanned again (SCAN only promises keys that stay put). A slot on a primary the scan did
not start with stops the scan.
"""

from __future__ import annotations

from typing import Any

from redis.cluster import RedisCluster

from bot.core.errors import ScanInterruptedError
from bot.scan.cluster_node import Node
from bot.scan.types import Batch
from bot.store import slots, tenure_plan


class SlotMoves:
    """`settle` each batch, `gained` at the end; `redirect`: for the batch last settled, the
    table each arrived key is written to."""

    def __init__(
        self,
        client: RedisCluster,
        plan: tenure_plan.TenurePlan,
        prev: tenure_plan.TenurePlan | None,
    ) -> None:
        self.client, self.plan, self.prev = client, plan, prev
        self.redirect: dict[bytes, bytes] = {}  # last batch: key -> the table it goes to
        self._foreign: set[bytes] = set()  # keys taken from a node their slot moved to
        self._handled: dict[int, str] = {}  # slot -> the primary it moved to, seen at the end

    def looks_up(self, moved_keys: set[bytes] | None) -> bool:
        """Whether `settle` may look keys up in the tenure tables (records written first); False
        when no slot moved."""
        return moved_keys is None or bool(moved_keys) or bool(self._foreign)

    def settle(self, node: Node, batch: Batch, moved_keys: set[bytes] | None) -> Batch:
        """The batch with keys of moved slots put right. `moved_keys`: the keys the batch script
        found in such slots (None: look at every key)."""
        self.redirect = {}
        foreign = self._foreign
        if not self.looks_up(moved_keys):
            return batch
        owners, index, slot_of = self.plan.owners, node.index, slots.slot_of
        prev_owners = None if node.exact or self.prev is None else self.prev.owners
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
        return self._look_up(node, out, moved, arrived)

    def _look_up(
        self, node: Node, out: Batch, moved: list[tuple[int, int]], arrived: list[tuple[int, int]]
    ) -> Batch:
        """`out` with the previous records of `moved` and `arrived` keys read from their slots'
        tables of the last scan, and arrived keys this scan already wrote dropped as repeats."""
        prev, foreign = self.prev, self._foreign
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
                self.redirect[key] = self.plan.table_of(slot)
        if any(slot not in node.known for _, slot in arrived):
            node.again = True  # this pass may have passed where the slot's keys landed
            node.arrived.update(slot for _, slot in arrived)
        return [x for i, x in enumerate(out) if i not in drop] if drop else out

    def gained(self, nodes: list[Node]) -> list[Node]:
        """Once every node is done: the nodes that gained slots since the scan started, to be
        scanned again; a slot on a primary the plan does not know stops the scan."""
        self.client.nodes_manager.initialize()
        now = tenure_plan.make(self.client, self.plan.gen)
        by_name = {n.name: n for n in nodes}
        gained: dict[str, Node] = {}
        for s in range(slots.SLOTS):
            owner = now.node_of(s)
            if owner in ("", self.plan.node_of(s)) or self._handled.get(s) == owner:
                continue
            self._handled[s] = owner
            if owner not in by_name:
                raise ScanInterruptedError(
                    f"the scan stopped: slot {s} moved to cluster node {owner} while it ran, a "
                    "primary it did not start with; nothing was recorded and the tenure history "
                    "is kept: the next scan starts again"
                )
            gained[owner] = by_name[owner]
        return list(gained.values())
