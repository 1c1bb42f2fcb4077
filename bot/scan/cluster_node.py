"""One primary of a Redis Cluster scan: its tables in the tenure plan and its own `Scanner`."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

import redis
from redis.typing import EncodableT

from bot.core.pacing import Pacer
from bot.scan.batch_script import CLUSTER_READ_KEYS_LUA, CLUSTER_SCAN_KEYS_LUA
from bot.scan.scanner import ReadMode, Scanner
from bot.scan.types import Batch
from bot.store import slots, tenure_plan


class ScannerOptions(TypedDict):
    """`Scanner`'s settings that every primary of a cluster scan shares."""

    count: int
    mode: ReadMode
    max_fields: int
    max_value_bytes: int
    pacer: Pacer | None


@dataclass(slots=True)
class Node:
    name: str  # host:port
    client: redis.Redis
    index: int  # this scan's table of the node, in the plan
    new_table: bytes
    prev_table: bytes  # the previous table on this node holding most of its slots' records
    prev_index: int  # its index in the previous plan (-1: none)
    exact: bool  # every slot of the node has its previous records in prev_table (or none)
    scanner: NodeScanner
    passes: int = 0  # SCANs of the node begun in this scan
    again: bool = False  # slots moved to the node during this pass: scan it once more
    moving_seen: int = 0  # keys of slots being resharded, as of the last batch
    arrived: set[int] = field(default_factory=set)  # slots seen moving to the node
    known: set[int] = field(default_factory=set)  # of those, the ones there as this pass began
    pending: dict[bytes, bytes] = field(default_factory=dict)  # tenure records not yet written


def planned_node(
    plan: tenure_plan.TenurePlan,
    prev: tenure_plan.TenurePlan | None,
    name: str,
    client: redis.Redis,
    **scanner_options: Unpack[ScannerOptions],
) -> Node:
    """The primary `name` of `plan`, reading previous records from the table of `prev` (the last
    completed scan's plan) on this node that holds the most of its slots' records."""
    index = plan.nodes.index(name)
    mine = [s for s in range(slots.SLOTS) if plan.owners[s] == index]
    prev_table, prev_index, exact = slots.tenure_table(plan.gen - 1, min(mine)), -1, True
    if prev is not None:
        counts: dict[int, int] = {}
        for s in mine:
            counts[prev.owners[s]] = counts.get(prev.owners[s], 0) + 1
        local = [
            j for j in counts if j != tenure_plan.NO_TABLE and plan.owners[prev.tables[j]] == index
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
    scanner = NodeScanner(client, new_table, bytes(plain), **scanner_options)
    return Node(name, client, index, new_table, prev_table, prev_index, exact, scanner)


class NodeScanner(Scanner):
    """`Scanner` on one primary with the cluster scripts (the tables passed as ARGV); in AUTO
    mode any refusal of the probe (Redis < 7 cannot compile the flags) means pipelined reads."""

    _SCAN = CLUSTER_SCAN_KEYS_LUA
    _READ = CLUSTER_READ_KEYS_LUA
    # A node's tenure records are filed by the slot of their key, which an oversized key's
    # `BigKey.name` does not share: on a cluster they are only counted and named.
    _READ_BIG = False

    def __init__(
        self,
        client: redis.Redis,
        probe_table: bytes,
        plain: bytes,
        **kwargs: Unpack[ScannerOptions],
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
        return [], [*args, *keys, self.plain]  # the read's ARGV[9..11] (`_read_args`)

    def _parse_lua(self, reply: list[Any], in_hand: AbstractSet[bytes]) -> Batch:
        self.moved = set(reply[9]) if reply[9] else set()
        return super()._parse_lua(reply, in_hand)

    def _choose_mode(self, mode: ReadMode) -> ReadMode:
        try:
            return super()._choose_mode(mode)  # probes in AUTO mode only
        except redis.ResponseError:
            return ReadMode.PIPELINE
