"""Release approved locks: a compare-and-delete on the exact approved bytes (`scripts`).

One atomic step compares, deletes, wakes the library's waiters, publishes the reclaim event and
records the outcome. A lock re-acquired since the scan is skipped; one whose TTL was re-armed
since the approved reading is left alone as "recovered". Always Lua, never `DELEX key IFEQ value`:
DELEX compares the value only, "recovered" also needs the TTL and `TIME` in the same step, and
the event and record must not be separable from the deletion. With `grace_ms` (lock-delay) the
script shortens the TTL instead, never lengthens it, and publishes `lock_delayed`.
"""

from __future__ import annotations

import redis

from bot.core.pacing import Pacer
from bot.release.outcome import ApprovedLock, Outcome, Recording, Result
from bot.release.runner import ScriptRunner
from bot.release.verifier import Verifier
from bot.release.waiters import FairWake, wake_lines


class Releaser:
    """Never raises for Redis errors (they become `Outcome.ERROR`). Its `verifier` reads the
    locks back with the same grace."""

    def __init__(
        self, client: redis.Redis, *, grace_ms: int | None = None, pacer: Pacer | None = None
    ) -> None:
        self._scripts = ScriptRunner(client, grace_ms, pacer)
        self.client = client
        self.grace_ms = grace_ms
        self.verifier = Verifier(self._scripts)
        self._fair = FairWake(client)

    def release(self, target: ApprovedLock, rec: Recording | None = None) -> Result:
        return self.release_many([(target, rec)])[0]

    def release_many(self, items: list[tuple[ApprovedLock, Recording | None]]) -> list[Result]:
        """A lock whose reply was lost comes back as an error: the caller re-reads its recorded
        outcome."""
        op = "delay" if self.grace_ms is not None else "del"
        replies = self._scripts.run([(t, r, op) for t, r in items])
        results = [
            Result(target.key, Outcome.ERROR, reply)
            if isinstance(reply, str)
            else reply.result(target, self.grace_ms)
            for (target, _), reply in zip(items, replies, strict=True)
        ]
        if op != "del":
            return results
        return self._fair.after([t for t, _ in items], results)  # Redisson's fair-lock queue

    def wake_lines(self, target: ApprovedLock) -> list[str]:
        return wake_lines(target)
