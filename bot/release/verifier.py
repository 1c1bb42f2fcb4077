"""Verifying a release: each released key read back once its script has run.

The check is the release script itself with op 'check': the same compare against what the human
approved, changing and recording nothing, many keys in one pipeline (`verify_many`). Only results
released now are read back; one decided by an earlier run keeps its recorded outcome.

Absent, or (lock-delay) still the approved holder with a TTL within the grace: the result stands.
A new holder: the outcome stands, the detail says so. The approved holder still there otherwise
(a delete lost in a failover): `Outcome.ERROR`.
"""

from __future__ import annotations

from dataclasses import replace

from bot.release.outcome import ApprovedLock, Outcome, Result
from bot.release.reply import UNEXPECTED, Reply
from bot.release.runner import ScriptRunner
from bot.release.scripts import Code


class Verifier:
    """Reads released keys back through the scripts of one `ScriptRunner` (its grace is the
    one the locks were released with)."""

    def __init__(self, scripts: ScriptRunner) -> None:
        self._scripts = scripts

    @property
    def grace_ms(self) -> int | None:
        return self._scripts.grace_ms

    def verify(self, target: ApprovedLock, result: Result) -> Result:
        return self.verify_many([(target, result)])[0]

    def verify_many(self, items: list[tuple[ApprovedLock, Result]]) -> list[Result]:
        """Each result as verification leaves it (see the module docstring)."""
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
            if grace is not None:
                return replace(
                    result,
                    outcome=Outcome.ERROR,
                    detail=f"verification failed: the approved holder still holds it "
                    f"with {ttl}, above the {grace} ms grace",
                )
            return replace(
                result,
                outcome=Outcome.ERROR,
                detail=f"verification failed: the approved holder still holds it "
                f"with {ttl} after the delete",
            )
        return replace(result, outcome=Outcome.ERROR, detail=f"verification failed: {UNEXPECTED}")
