"""Redis Cluster slots: which keys lockguard writes next to a lock, in the lock's own slot.

On a Redis Cluster a script may only touch keys of the node it runs on, and a record kept next to
a lock must move with it when its slot is resharded. So the records lockguard keeps *per lock*
live in the lock's slot, under `{lockguard:<tag>}:`, where `<tag>` is two bytes chosen so that
the hash tag `lockguard:<tag>` lands in that slot. CRC16 (XMODEM, zero start) is linear, so
CRC16(`lockguard:` + t) = K xor L(t) with L a bijection of 16-bit values: the tag of slot s is
L^-1(s xor K), or the next of the three other values in the slot (s + 16384 k) when that one
holds a `{` or `}` byte. Python (`tag`) and the Lua scripts (`TAG_LUA`, which the scan batch and
the lease writes run on each node) compute the same tags from the same two 256-entry tables:

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


def _solve(v: int) -> int:
    low, high, _ = _inverse()
    return low[v & 255] ^ high[v >> 8]


@cache
def tags() -> tuple[bytes, ...]:
    """For each slot, the 2-byte tag whose `{lockguard:<tag>}` hashes to it (see above)."""
    k = _inverse()[2]
    out = []
    for slot in range(SLOTS):
        for top in range(4):
            t = _solve((slot | top << 14) ^ k)
            if t >> 8 not in _BRACES and t & 255 not in _BRACES:
                out.append(bytes((t >> 8, t & 255)))
                break
        else:  # pragma: no cover - checked for every slot by the tests
            raise AssertionError(f"no brace-free tag for slot {slot}")
    return tuple(out)


def tag_lua() -> str:
    """Lua: `slot_tag(slot)` -> the slot's tag, as `tags()` computes it (needs `bit`)."""
    low, high, k = _inverse()
    return (f"local TAG_LOW = {{{','.join(map(str, low))}}}\n"
            f"local TAG_HIGH = {{{','.join(map(str, high))}}}\n"
            f"local TAG_K = {k}\n" + """local tag_cache = {}
local function slot_tag(slot)
  local t = tag_cache[slot]
  if t then return t end
  for top = 0, 3 do
    local v = bit.bxor(slot + top * 16384, TAG_K)
    local x = bit.bxor(TAG_LOW[bit.band(v, 255) + 1], TAG_HIGH[bit.rshift(v, 8) + 1])
    local hi, lo = bit.rshift(x, 8), bit.band(x, 255)
    if hi ~= 123 and hi ~= 125 and lo ~= 123 and lo ~= 125 then
      t = string.char(hi, lo)
      tag_cache[slot] = t
      return t
    end
  end
end
""")


def is_cluster(client: object) -> bool:
    """True for a Redis Cluster client (REDIS_CLUSTER=true): keys live on several nodes."""
    return isinstance(client, RedisCluster)


def slot_of(key: bytes) -> int:
    """The key's cluster slot, from its exact bytes (a `{...}` in a binary value counts)."""
    return key_slot(key)


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
