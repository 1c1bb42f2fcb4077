"""The digest's ledger in Redis: when the last digest went out, and the scans counted since.

`lockguard serve` counts every scan it runs (scheduled, webhook, slash; on whichever replica) in
the `{lockguard}:digest` hash (`bot.store.keyspace`): `scans_ok` and `scans_failed`. The digest
reads them with `last_posted_ms` ("since the last digest"), and once it is posted `posted()` sets
the new time and subtracts what it reported, in one MULTI, so that a scan counted while the digest
was being posted is reported by the next one rather than lost.

Counting never fails a scan: a Redis error while counting is logged and the count is missed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import cast

import redis

from bot.core import logs
from bot.engine import Engine
from bot.store.connection import redis_errors
from bot.store.keyspace import DIGEST

LAST_POSTED = b"last_posted_ms"
SCANS_OK = b"scans_ok"
SCANS_FAILED = b"scans_failed"
_log = logs.logger("digests")


@dataclass(frozen=True, slots=True)
class Tally:
    """What the ledger holds: `since_ms` None before the first digest."""

    since_ms: int | None = None
    scans_ok: int = 0
    scans_failed: int = 0


def _int(raw: bytes | None) -> int:
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 0


class DigestLedger:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def count(self, ok: bool) -> None:
        """One scan ran: completed (`ok`) or failed. Never raises."""
        try:
            self.engine.client.hincrby(DIGEST, SCANS_OK if ok else SCANS_FAILED, 1)
        except redis.RedisError as exc:
            logs.event(
                _log, "digest_count_missed", logging.WARNING, ok=ok, error=type(exc).__name__
            )

    def read(self) -> Tally:
        """The ledger now; a LockguardError when Redis fails."""
        with redis_errors(self.engine.endpoint, self.engine.secrets):
            raw = cast(
                "list[bytes | None]",
                self.engine.client.hmget(DIGEST, [LAST_POSTED, SCANS_OK, SCANS_FAILED]),
            )
        since = _int(raw[0])
        return Tally(
            since_ms=since or None, scans_ok=max(_int(raw[1]), 0), scans_failed=max(_int(raw[2]), 0)
        )

    def posted(self, now_ms: int, reported: Tally) -> None:
        """A digest reporting `reported` went out at `now_ms` (server time)."""
        with (
            redis_errors(self.engine.endpoint, self.engine.secrets),
            self.engine.client.pipeline(transaction=True) as pipe,
        ):
            pipe.hset(DIGEST, LAST_POSTED, now_ms)
            pipe.hincrby(DIGEST, SCANS_OK, -reported.scans_ok)
            pipe.hincrby(DIGEST, SCANS_FAILED, -reported.scans_failed)
            pipe.execute()
