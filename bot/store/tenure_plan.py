"""Where a Redis Cluster scan keeps its tenure history: one table per primary, next to its keys.

On one server a tenure generation N is one hash. On a cluster it is one hash per primary, in a
slot that primary serves, so that each node's batch script reads every key's previous record
with one HMGET and the scan writes a batch with one HSET, all on the node that holds the keys
(a table per *slot* costs a command per key: about 2x the Redis CPU). Which table holds which
slot's records is the generation's plan, written when the scan starts, from the slot map then:

- `tables`: each table's slot; the table is `{lockguard:<tag>}:leases:N` (`bot.store.slots`);
- `owners`: 16384 bytes, for each slot the index in `tables` of the table holding its records.

A slot that changes primary between two scans keeps its records in the old table, which the
next scan reads through the cluster client (routed to wherever that table's slot is now). A
slot that changes primary *during* a scan still has its records written to the table the plan
gave it, so that every slot's records are in exactly one table (`bot.scan.cluster_scanner`).
The plan itself is `{lockguard}:leases:N:plan` (hash), unlinked with the generation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import redis
from redis.cluster import RedisCluster

from bot.store import slots
from bot.store.keyspace import tenure_plan_key

#: The owner index (one byte) of a slot no primary served when the plan was made; so a plan has
#: at most this many tables.
NO_TABLE = 255


@dataclass(frozen=True, slots=True)
class TenurePlan:
    gen: int
    tables: tuple[int, ...]  # table index -> the slot its hash is in
    owners: bytes  # slot -> table index
    nodes: tuple[str, ...]  # table index -> the primary (host:port) it was planned for

    def table(self, index: int) -> bytes:
        return slots.tenure_table(self.gen, self.tables[index])

    def table_of(self, slot: int) -> bytes:
        """The table that holds (or, for this scan's plan, will hold) the slot's records; for a
        slot no primary served then, a name no table has (it holds nothing)."""
        index = self.owners[slot]
        if index == NO_TABLE:
            return slots.tenure_table(self.gen, slot)
        return self.table(index)

    def node_of(self, slot: int) -> str:
        """The primary that served the slot when the plan was made ("" for none)."""
        index = self.owners[slot]
        return "" if index == NO_TABLE else self.nodes[index]

    def names(self) -> list[bytes]:
        return [self.table(i) for i in range(len(self.tables))]


def make(client: RedisCluster, gen: int) -> TenurePlan:
    """The plan of generation `gen` from the client's slot map (which the caller refreshed):
    a table per primary, in the lowest slot it serves."""
    by_node: dict[str, list[int]] = {}
    for slot, nodes in client.nodes_manager.slots_cache.items():
        if nodes:
            by_node.setdefault(f"{nodes[0].host}:{nodes[0].port}", []).append(slot)
    if len(by_node) > NO_TABLE - 1:
        raise redis.RedisError(
            f"lockguard scans clusters of at most {NO_TABLE - 1} primaries; "
            f"this one has {len(by_node)}"
        )
    names = sorted(by_node)
    owners = bytearray([NO_TABLE]) * slots.SLOTS
    for i, name in enumerate(names):
        for slot in by_node[name]:
            owners[slot] = i
    return TenurePlan(gen, tuple(min(by_node[n]) for n in names), bytes(owners), tuple(names))


def save(client: RedisCluster, plan: TenurePlan) -> None:
    client.hset(
        tenure_plan_key(plan.gen),
        mapping={
            "tables": ",".join(map(str, plan.tables)),
            "owners": plan.owners,
            "nodes": ",".join(plan.nodes),
        },
    )


def load(client: RedisCluster, gen: int) -> TenurePlan | None:
    """Generation `gen`'s plan, or None when there is none (no scan completed yet, or a table
    layout this version does not read: that scan's history then starts afresh)."""
    if gen <= 0:
        return None
    raw = cast("dict[bytes, bytes]", client.hgetall(tenure_plan_key(gen)))
    tables, owners, nodes = raw.get(b"tables"), raw.get(b"owners"), raw.get(b"nodes", b"")
    if not tables or not isinstance(owners, bytes) or len(owners) != slots.SLOTS:
        return None
    try:
        table_slots = tuple(int(x) for x in tables.split(b","))
    except ValueError:
        return None
    if any(o >= len(table_slots) and o != NO_TABLE for o in set(owners)) or not all(
        0 <= t < slots.SLOTS for t in table_slots
    ):
        return None
    return TenurePlan(gen, table_slots, owners, tuple(nodes.decode().split(",")))


def drop(client: RedisCluster, gen: int) -> None:
    """Unlink generation `gen`: its tables (each routed to its slot's primary) and its plan."""
    plan = load(client, gen)
    if plan is not None:
        for table in plan.names():
            client.unlink(table)
    client.unlink(tenure_plan_key(gen))
