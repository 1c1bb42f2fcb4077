"""Where a Redis Cluster scan keeps its tenure history: one table per primary, next to its keys.

A generation N is one hash per primary, in a slot it serves, so each node's batch reads and
writes its keys' records with one HMGET and one HSET (a table per slot: a command per key). The
plan, `{lockguard}:leases:N:plan`, is made from the slot map when the scan starts: `tables` (each
table's slot) and `owners` (16384 bytes: each slot's table index). A slot that changed primary
keeps its records in the table the plan gave it, read through the cluster client, so every
slot's records are in exactly one table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import redis
from redis.cluster import RedisCluster

from bot.store import slots
from bot.store.keyspace import tenure_plan_key

#: The owner index of a slot no primary served when the plan was made.
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
        """The table holding the slot's records (a slot no primary served: a name no table has)."""
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
    """The plan of generation `gen` from the client's slot map: a table per primary, in the
    lowest slot it serves."""
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
    """Generation `gen`'s plan, or None (none, or unreadable: the history starts afresh)."""
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
    plan = load(client, gen)
    if plan is not None:
        for table in plan.names():
            client.unlink(table)
    client.unlink(tenure_plan_key(gen))
