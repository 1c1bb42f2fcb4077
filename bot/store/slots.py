"""Redis Cluster slots: the keys lockguard writes in a chosen slot, next to the locks it tracks.

A script may only touch keys of the node it runs on, so the records kept next to the locks live
under `{lockguard:<tag>}:`, `<tag>` two bytes putting the hash tag in a given slot. CRC16 is
linear: CRC16(`lockguard:` + t) = K xor L(t), so the tag of slot s is L^-1(s xor K), or the next
of s + 16384 k whose bytes hold no `{` or `}` (`tags`). The keys (none on a single server):

- `{lockguard:<tag>}:leases:<N>` (hash, no TTL): tenure table N of a primary (`tenure_plan`);
- `{lockguard:<tag>}:receipt:<case id>` (hash, the case's retention): lock index ->
  `<outcome>\\n<JSON>`, written by the release script in the same atomic step as the delete.
"""

from __future__ import annotations

from binascii import crc_hqx
from functools import cache

import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from bot.store.keyspace import SLOT_PREFIX

SLOTS = 16384

_BRACES = (0x7B, 0x7D)  # `{` and `}`: a tag holding one would end or move the hash tag


@cache
def _inverse() -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """L^-1 as two 256-entry tables (by the low and the high byte of its argument), and K."""
    inv = [0] * 65536
    for t in range(65536):
        inv[crc_hqx(bytes((t >> 8, t & 255)), 0)] = t
    low = tuple(inv[v] for v in range(256))
    high = tuple(inv[v << 8] for v in range(256))
    return low, high, crc_hqx(b"lockguard:\0\0", 0)


@cache
def tags() -> tuple[bytes, ...]:
    """For each slot, the 2-byte tag whose `{lockguard:<tag>}` hashes to it."""
    low, high, k = _inverse()
    out = []
    for slot in range(SLOTS):
        for top in range(4):
            v = (slot | top << 14) ^ k
            t = low[v & 255] ^ high[v >> 8]
            if t >> 8 not in _BRACES and t & 255 not in _BRACES:
                out.append(bytes((t >> 8, t & 255)))
                break
        else:  # pragma: no cover - checked for every slot by the tests
            raise AssertionError(f"no brace-free tag for slot {slot}")
    return tuple(out)


def is_cluster(client: object) -> bool:
    return isinstance(client, RedisCluster)


def slot_of(key: bytes) -> int:
    """The key's cluster slot, from its exact bytes (a `{...}` in a binary value counts)."""
    return key_slot(key)


def slot_prefix(slot: int) -> bytes:
    return SLOT_PREFIX + tags()[slot] + b"}:"


def tenure_table(gen: int, slot: int) -> bytes:
    return slot_prefix(slot) + b"leases:" + str(gen).encode()


def receipt_key(case_id: str, lock_key: bytes) -> bytes:
    return slot_prefix(slot_of(lock_key)) + b"receipt:" + case_id.encode()


def primaries(client: RedisCluster) -> list[tuple[str, redis.Redis]]:
    """Every primary now: (host:port, a plain client to it)."""
    return [
        (f"{node.host}:{node.port}", client.get_redis_connection(node))
        for node in client.get_primaries()
    ]
