"""The keyspace migration: lockguard's own keys move from format 1 (`lockguard:*`) to format 2
(`{lockguard}:*`, one Cluster slot), once per Redis, by whichever process comes first.

Every old key is RENAMENX'd, keeping value and TTL; one whose new name exists (an old version
wrote on during a rolling upgrade) is left and logged. Only `FORMAT1_NAMES` move: any other key
under `lockguard:` is not lockguard's. `{lockguard}:keyspace` = 2 then makes it one GET per
process. One process holds `{lockguard}:migrating` while others wait (`WAIT_S`); it is given
back however the migration ends, so a refused one leaves nothing to wait on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from dataclasses import dataclass
from typing import cast

import redis

from bot.core import logs
from bot.core.display import escape
from bot.core.errors import LockguardError
from bot.store import lease_keys, slots
from bot.store.keyspace import FORMAT, KEYSPACE, LEGACY_PREFIX, MIGRATING, PREFIX

#: How long one migration may hold its lease without finishing a batch.
LEASE_MS = 60_000
#: How long a process waits for another's migration before giving up with an error.
WAIT_S = 30.0
#: Keys renamed per round trip.
BATCH = 500
#: SCAN COUNT of the walk over the old prefix: each call holds Redis for about 0.25 ms.
SCAN_COUNT = 200
#: Every name format 1 wrote, but `scan:lease` (an old version's running scan owns it until it
#: lapses). Anything else under `lockguard:` is not lockguard's (an application may name its own
#: keys so) and is never touched.
FORMAT1_NAMES = re.compile(
    rb"lockguard:(?:leases:(?:gen|\d+)|scan:last|heartbeat|cases|open-locks|rejections|audit"
    rb"|case:LG-\d{6}-[0-9a-f]{6}(?::locks|:outcomes)?|manifest:LG-\d{6}-[0-9a-f]{6})",
    re.DOTALL,
)

_log = logs.logger("migration")


@dataclass(frozen=True, slots=True)
class Migration:
    moved: int
    kept: int  # old keys left because their new name already existed
    seconds: float


def new_name(old: bytes) -> bytes:
    """`lockguard:case:LG-1` -> `{lockguard}:case:LG-1`."""
    return PREFIX + old[len(LEGACY_PREFIX) :]


def ensure(client: redis.Redis, *, wait_s: float = WAIT_S) -> Migration | None:
    """Bring this Redis to keyspace format 2; None when it already was (or another process did
    it). A Redis Cluster never held format 1: it is only marked."""
    if client.get(KEYSPACE) == FORMAT:
        return None
    if slots.is_cluster(client):
        client.set(KEYSPACE, FORMAT)
        return None
    token = os.urandom(16).hex().encode()
    deadline = time.monotonic() + wait_s
    while not lease_keys.take(client, MIGRATING, token, LEASE_MS):
        if client.get(KEYSPACE) == FORMAT:
            return None
        if time.monotonic() >= deadline:
            raise LockguardError(
                f"another lockguard process has been moving lockguard's keys to the "
                f"{PREFIX.decode()} prefix for over {wait_s:.0f} s ({MIGRATING.decode()} is held); "
                "try again when it has finished"
            )
        time.sleep(0.1)
    try:
        if client.get(KEYSPACE) == FORMAT:  # finished by the holder before us
            return None
        result = _move(client)
        client.set(KEYSPACE, FORMAT)
    finally:
        # Redis gone: it lapses within LEASE_MS (the migration's own failure is the one shown).
        with contextlib.suppress(redis.RedisError):
            lease_keys.give_back(client, MIGRATING, token)
    level = logging.INFO if result.moved or result.kept else logging.DEBUG
    logs.event(
        _log,
        "keyspace_migrated",
        level=level,
        moved=result.moved,
        kept=result.kept,
        seconds=round(result.seconds, 3),
    )
    return result


def _move(client: redis.Redis) -> Migration:
    started = time.monotonic()
    moved = kept = 0
    cursor = 0
    pattern = LEGACY_PREFIX + b"*"  # no glob character in the prefix itself
    while True:
        cursor, found = client.scan(cursor=cursor, match=pattern, count=SCAN_COUNT)
        keys = [k for k in cast("list[bytes]", found) if FORMAT1_NAMES.fullmatch(k)]
        for i in range(0, len(keys), BATCH):
            chunk = keys[i : i + BATCH]
            pipe = client.pipeline(transaction=False)
            for key in chunk:
                pipe.renamenx(key, new_name(key))
            pipe.pexpire(MIGRATING, LEASE_MS)
            for key, done in zip(chunk, pipe.execute(raise_on_error=False)[:-1], strict=True):
                if isinstance(done, Exception):
                    if "no such key" in str(done).lower():
                        continue  # expired or deleted since SCAN returned it
                    raise done
                if done:
                    moved += 1
                else:
                    kept += 1
                    logs.event(
                        _log,
                        "keyspace_key_kept",
                        level=logging.WARNING,
                        key=escape(key),
                        reason=f"{escape(new_name(key))} already exists",
                    )
        if cursor == 0:
            return Migration(moved=moved, kept=kept, seconds=time.monotonic() - started)
