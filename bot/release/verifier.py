"""Verifying a release: each key released now read back with the release script's op 'check'
(the same compare, changing nothing). Absent, or (lock-delay) the approved holder within the
grace: the result stands. A new holder: the detail says so. The approved holder otherwise (a
delete lost in a failover): `Outcome.ERROR`.
"""

from __future__ import annotations

from dataclasses import replace

from bot.release.outcome import ApprovedLock, Outcome, Result
from bot.release.reply import UNEXPECTED, Reply
from bot.release.runner import ScriptRunner
from bot.release.scripts import Code


class Verifier:
    """Reads keys back through the `ScriptRunner` (and grace) they were released with."""

    def __init__(self, scripts: ScriptRunner) -> None:
        self._scripts = scripts

    @property
    def grace_ms(self) -> int | None:
        return self._scripts.grace_ms

    def verify(self, target: ApprovedLock, result: Result) -> Result:
        return self.verify_many([(target, result)])[0]

    def verify_many(self, items: list[tuple[ApprovedLock, Result]]) -> list[Result]:
        todo = [
            (i, t)
            for i, (t, r) in enumerate(items)
            if r.outcome is Outcome.RELEASED and not r.earlier
        ]
        out = [r for _, r in items]
        replies = self._scripts.run([(t, None, "check") for _, t in todo])
        for (i, _), reply in zip(todo, replies, strict=True):
            out[i] = self._verified(out[i], reply)
        return out

    def _verified(self, result: Result, reply: Reply | str) -> Result:
        if isinstance(reply, str):
            return replace(
                result,
                outcome=Outcome.ERROR,
                detail=f"verification failed: could not read the key back ({reply})",
            )
        if reply.code is Code.GONE:
            return result
        if reply.code is Code.CHANGED:
            return replace(result, detail=f"{result.detail}; a new holder has acquired it since")
        if reply.code is Code.MATCH:
            grace = self.grace_ms
            if grace is not None and 0 <= reply.pttl <= grace:
                return result
            ttl = "no expiry" if reply.pttl < 0 else f"a TTL of {reply.pttl} ms"
            why = f", above the {grace} ms grace" if grace is not None else " after the delete"
            return replace(
                result,
                outcome=Outcome.ERROR,
                detail=f"verification failed: the approved holder still holds it with {ttl}{why}",
            )
        return replace(result, outcome=Outcome.ERROR, detail=f"verification failed: {UNEXPECTED}")
