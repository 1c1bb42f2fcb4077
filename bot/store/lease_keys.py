"""lockguard's own leases in Redis (the scan lease, the keyspace migration's, the leader's): one
key each, taken with SET NX PX holding a random token, then renewed and given back only while it
holds exactly that token, never by a plain DEL or PEXPIRE.

Renewing and giving back compare and act in one step: a script, or where scripting is refused a
WATCH / MULTI transaction, so a refusal never leaves a lease held for others to wait on.
"""

from __future__ import annotations

import redis
from redis.typing import KeyT

# KEYS[1] the lease. ARGV[1] our exact value, ARGV[2] lease ms. 1 when renewed, 0 when not ours.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
# KEYS[1] the lease. ARGV[1] our exact value. 1 when deleted, 0 when not ours (left alone).
_GIVE_BACK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def take(client: redis.Redis, key: KeyT, token: bytes, lease_ms: int) -> bool:
    return bool(client.set(key, token, nx=True, px=lease_ms))


def renew(client: redis.Redis, key: KeyT, token: bytes, lease_ms: int) -> bool:
    """Extend the lease to `lease_ms` from now if it still holds exactly `token`."""
    return _if_ours(client, key, token, lease_ms)


def give_back(client: redis.Redis, key: KeyT, token: bytes) -> bool:
    """Delete the lease only if it still holds exactly `token`: never another's."""
    return _if_ours(client, key, token, None)


def _if_ours(client: redis.Redis, key: KeyT, token: bytes, lease_ms: int | None) -> bool:
    try:
        if lease_ms is None:
            return bool(int(client.eval(_GIVE_BACK, 1, key, token)))
        return bool(int(client.eval(_RENEW, 1, key, token, lease_ms)))
    except redis.ResponseError:  # scripting refused here: the same in a transaction
        pass
    with client.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(key)
            if pipe.get(key) != token:
                pipe.unwatch()
                return False
            pipe.multi()
            if lease_ms is None:
                pipe.delete(key)
            else:
                pipe.pexpire(key, lease_ms)
            done = pipe.execute()
        except redis.WatchError:  # changed since WATCH: someone else's now
            return False
    return bool(done and done[0])
