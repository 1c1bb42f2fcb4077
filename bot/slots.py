"""Redis Cluster slots: which keys lockguard writes next to a lock, in the lock's own slot.

On a Redis Cluster a script may only touch keys of the node it runs on, and a record kept next to
a lock must move with it when its slot is resharded. So the records lockguard keeps *per lock*
live in the lock's slot, under `{lockguard:<tag>}:`, where `<tag>` is the shortest base-36 string
whose hash tag `lockguard:<tag>` lands in that slot (computed once, ~50 ms, on first use):

- `{lockguard:<tag>}:leases:<N>` (hash, no TTL): lease table N's share for the slot, lock key ->
  lease record (`bot.leases`);
- `{lockguard:<tag>}:receipt:<case id>` (hash, the case's retention): lock index ->
  `<outcome>\\n<JSON>`, written by the release script in the same atomic step as the delete;
  `bot.case_release` copies it into the case.

Everything else (cases, audit, leader, ...) stays in the one `{lockguard}` slot (`bot.keyspace`).
On a single server none of these keys exist: the lease table is one hash and the release script
records straight into the case.
"""

from __future__ import annotations

from binascii import crc_hqx
from functools import cache

import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from bot.keyspace import SLOT_PREFIX

SLOTS = 16384

#: Unlinks per-slot tables of the node it runs on. ARGV: the table names.
CLUSTER_UNLINK_LUA = """#!lua flags=allow-cross-slot-keys
for i = 1, #ARGV do redis.call('UNLINK', ARGV[i]) end
return 1
"""
_ALPHABET = b"0123456789abcdefghijklmnopqrstuvwxyz"


def is_cluster(client: object) -> bool:
    """True for a Redis Cluster client (REDIS_CLUSTER=true): keys live on several nodes."""
    return isinstance(client, RedisCluster)


def slot_of(key: bytes) -> int:
    """The key's cluster slot, from its exact bytes (a `{...}` in a binary value counts)."""
    return key_slot(key)


@cache
def tags() -> tuple[bytes, ...]:
    """For each slot, the shortest tag whose `{lockguard:<tag>}` hashes to it."""
    out: list[bytes | None] = [None] * SLOTS
    left, i = SLOTS, 0
    while left:
        tag, n = b"", i
        while True:
            tag = _ALPHABET[n % 36 : n % 36 + 1] + tag
            n //= 36
            if not n:
                break
        slot = crc_hqx(b"lockguard:" + tag, 0) % SLOTS
        if out[slot] is None:
            out[slot] = tag
            left -= 1
        i += 1
    return tuple(t for t in out if t is not None)


def slot_prefix(slot: int) -> bytes:
    return SLOT_PREFIX + tags()[slot] + b"}:"


def lease_table(gen: int, slot: int) -> bytes:
    return slot_prefix(slot) + b"leases:" + str(gen).encode()


def receipt_key(case_id: str, lock_key: bytes) -> bytes:
    return slot_prefix(slot_of(lock_key)) + b"receipt:" + case_id.encode()


def primaries(client: RedisCluster) -> list[tuple[str, redis.Redis]]:
    """Every primary now: (host:port, a plain client to it)."""
    return [(f"{node.host}:{node.port}", client.get_redis_connection(node))
            for node in client.get_primaries()]


def slots_by_node(client: RedisCluster) -> dict[str, list[int]]:
    """host:port of each primary -> the slots it serves, from the client's slot map."""
    out: dict[str, list[int]] = {}
    for slot, nodes in client.nodes_manager.slots_cache.items():
        if nodes:
            out.setdefault(f"{nodes[0].host}:{nodes[0].port}", []).append(slot)
    return out
