"""Release receipts on a Redis Cluster: a lock's outcome, recorded in the lock's own slot.

No script may touch both the case (`{lockguard}` slot) and the lock, so there the release script
records into a receipt hash in the lock's slot, atomically with the delete and the event, and
`bot.cases.approval` copies it into the case afterwards. A release cut short between the two is
finished from the receipt: nothing released or announced twice, the outcome stays exact.
"""

from __future__ import annotations

from typing import Any, cast

import redis

from bot.cases.case import parse_outcome
from bot.store import slots


def in_use(client: redis.Redis) -> bool:
    """Do release scripts record into receipts here (a Redis Cluster), not into the case?"""
    return slots.is_cluster(client)


def receipt_keys(client: redis.Redis, case_id: str, lock_keys: list[bytes]) -> list[bytes]:
    """Each lock's receipt key (b"" on one server)."""
    if not slots.is_cluster(client):
        return [b""] * len(lock_keys)
    return [slots.receipt_key(case_id, k) for k in lock_keys]


def read(
    client: redis.Redis, case_id: str, locks: list[tuple[int, bytes]]
) -> list[dict[str, Any] | None]:
    """The outcome each (index, lock key)'s receipt holds, or None (always on one server)."""
    if not locks or not slots.is_cluster(client):
        return [None] * len(locks)
    with client.pipeline(transaction=False) as pipe:
        for i, key in locks:
            pipe.hget(slots.receipt_key(case_id, key), str(i))
        raw = cast("list[bytes | None]", pipe.execute())
    return [parse_outcome(r) if r is not None else None for r in raw]


def keep(client: redis.Redis, case_id: str, lock_keys: list[bytes], retention_ms: int) -> None:
    """Receipts are kept as long as the case."""
    names = {k for k in receipt_keys(client, case_id, lock_keys) if k}
    if not names:
        return
    with client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.pexpire(name, retention_ms)
        pipe.execute(raise_on_error=False)
