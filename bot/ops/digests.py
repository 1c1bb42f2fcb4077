"""The digest's ledger, the `{lockguard}:digest` hash: when the last digest went out, and the
scans every replica counted since. `posted()` sets the new time and subtracts what the digest
reported in one MULTI, so a scan counted while it was being posted goes to the next digest.
Counting never fails a scan: a Redis error is logged and the count missed.
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
    """`since_ms` None before the first digest."""

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
        """Never raises."""
        try:
            self.engine.client.hincrby(DIGEST, SCANS_OK if ok else SCANS_FAILED, 1)
        except redis.RedisError as exc:
            logs.event(
                _log, "digest_count_missed", logging.WARNING, ok=ok, error=type(exc).__name__
            )

    def read(self) -> Tally:
        """A LockguardError when Redis fails."""
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
