"""An oversized key found again by what lockguard kept of it (`bot.core.model.BigKey`).

Only opening a case (the approver is shown its sha256) and releasing it (compare-and-delete
names the key exactly) need the exact bytes. `find` walks short `SCAN MATCH <first bytes>*` calls
and keeps keys of the same length and last bytes (and sha256, once known). Two keys that agree on
all of it cannot be told apart: neither is offered nor released. One key at a time is held whole.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import redis

from bot.core import globs
from bot.core.model import BigKey

COUNT = 1000  # per SCAN call: each stays short however big the keyspace


@dataclass(frozen=True, slots=True)
class Found:
    """The exact key (`key`, None when there is no single answer) and why not (`why`)."""

    key: bytes | None
    why: str = ""


def find(client: redis.Redis, big: BigKey) -> Found:
    """The one key `big` stands for; with `big.sha256` set, only a key of that digest."""
    match = globs.literal(big.head) + b"*"
    found: bytes | None = None
    cursor = 0
    while True:
        cursor, keys = client.scan(cursor, match=match, count=COUNT)
        for key in keys:
            if not isinstance(key, bytes) or len(key) != big.size or not key.endswith(big.tail):
                continue
            if big.sha256 and hashlib.sha256(key).hexdigest() != big.sha256:
                continue
            if found is not None and key != found:
                return Found(None, TWINS)
            found = key
        if cursor == 0:
            break
    return Found(found) if found is not None else Found(None, _GONE)


def digested(client: redis.Redis, big: BigKey) -> tuple[BigKey | None, str]:
    """`big` with its sha256, read from the key itself; None and why when it cannot be."""
    got = find(client, BigKey(big.head, big.tail, big.size))
    if got.key is None:
        return None, got.why
    return BigKey.of(got.key), ""


_GONE = "its oversized key is no longer there (no key has its first and last bytes and length)"
TWINS = (
    "more than one key has its first and last bytes and length: lockguard cannot tell them "
    "apart, and leaves them"
)
