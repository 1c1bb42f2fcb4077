"""Release receipts on a Redis Cluster: a lock's outcome, recorded in the lock's own slot.

On one server the release script records a lock's outcome straight into its case, in the same
atomic step as the delete. On a Redis Cluster the case lives in the `{lockguard}` slot and the
lock in its own, and no script may touch both; so the script records into a receipt hash in the
lock's slot (`bot.store.slots.receipt_key`), atomically with the delete and the event, and
`bot.cases.approval` copies the outcome into the case afterwards. A release cut short between the
two (a killed process, a lost reply, a failover) is finished from the receipt: no lock released
twice, no event sent twice, and its outcome stays exact (`released`, not `already_gone`).
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
    """Each lock's receipt key (b"" on one server: the case holds the outcomes)."""
    if not slots.is_cluster(client):
        return [b""] * len(lock_keys)
    return [slots.receipt_key(case_id, k) for k in lock_keys]


def read(
    client: redis.Redis, case_id: str, locks: list[tuple[int, bytes]]
) -> list[dict[str, Any] | None]:
    """The outcome each lock's receipt holds (index, lock key), None where there is none (and
    always None on one server)."""
    if not locks or not slots.is_cluster(client):
        return [None] * len(locks)
    with client.pipeline(transaction=False) as pipe:
        for i, key in locks:
            pipe.hget(slots.receipt_key(case_id, key), str(i))
        raw = cast("list[bytes | None]", pipe.execute())
    return [parse_outcome(r) if r is not None else None for r in raw]


def keep(client: redis.Redis, case_id: str, lock_keys: list[bytes], retention_ms: int) -> None:
    """Receipts are kept as long as the case: the retention from now."""
    names = {k for k in receipt_keys(client, case_id, lock_keys) if k}
    if not names:
        return
    with client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.pexpire(name, retention_ms)
        pipe.execute(raise_on_error=False)
