"""Release approved locks: a compare-and-delete on the exact approved bytes.

The scripts (`bot.release.scripts`) compare what they find with what the human approved and only
then delete, all in one atomic step that also wakes the library's own waiters, publishes the
reclaim event and records the outcome in the case. A lock re-acquired since the scan is skipped
and left untouched; a lock whose owner started renewing it again (its TTL re-armed since the
approved reading) is left alone as "recovered". What each reply means is read in one place,
`bot.release.reply`; reading the keys back afterwards is the `verifier`'s.

Why always Lua, never `DELEX key IFEQ value` (Redis 8.4+): DELEX compares the value only, while the
"recovered" check also needs the TTL and the server's `TIME` in the same atomic step, and the
event and the outcome record must not be separable from the deletion.

With `grace_ms` ("lock-delay", as Chubby and Consul have it) the script shortens the TTL
instead of deleting, guarded by the same compare, never lengthens it, and publishes a
`lock_delayed` event.

Many locks go in one pipeline (`release_many`, `Verifier.verify_many`): one round trip per batch.
"""

from __future__ import annotations

import redis

from bot.core.pacing import Pacer
from bot.release.outcome import ApprovedLock, Outcome, Recording, Result
from bot.release.runner import ScriptRunner
from bot.release.verifier import Verifier
from bot.release.waiters import FairWake, wake_lines


class Releaser:
    """Runs the release of approved locks; never raises for Redis errors (they become
    `Outcome.ERROR`). Its `verifier` reads them back with the same grace."""

    def __init__(
        self, client: redis.Redis, *, grace_ms: int | None = None, pacer: Pacer | None = None
    ) -> None:
        self._scripts = ScriptRunner(client, grace_ms, pacer)  # pacer: the budget's waits
        self.client = client
        self.grace_ms = grace_ms
        self.verifier = Verifier(self._scripts)
        self._fair = FairWake(client)

    def release(self, target: ApprovedLock, rec: Recording | None = None) -> Result:
        """Delete (or, with `grace_ms`, shorten the TTL of) the lock if it is still exactly what
        was approved."""
        return self.release_many([(target, rec)])[0]

    def release_many(self, items: list[tuple[ApprovedLock, Recording | None]]) -> list[Result]:
        """Many locks in a few short pipelines (`runner.PIPELINE_CALLS` each). If the connection
        fails mid-way, the locks whose replies were lost come back as errors: the caller
        re-reads their recorded outcomes."""
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
        """What the release script did to wake the library's own waiters."""
        return wake_lines(target)
