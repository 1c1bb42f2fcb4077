"""One case per scan, at any size: releasable findings stream into it as the scan goes, a
`BATCH` per script call (which leaves out locks in a live case or snoozed), so memory stays flat.
`finish` makes it pending once the scan completes; a failed scan `abandon`s it, so a half-scanned
case is never offered. A mass incident is one decision, up to `CASE_LIMIT` locks (the rest wait
for the next scan's case).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import redis

from bot.cases.case import Case, CaseLock, new_case_id
from bot.cases.case_store import BATCH, Added, CaseStore
from bot.core.model import BigKey, Finding
from bot.scan import oversized

#: The most locks one case holds (a lock stored takes about 400 bytes of Redis).
CASE_LIMIT = 100_000


@dataclass(slots=True)
class ProposalStats:
    added: int = 0
    in_live_case: int = 0
    snoozed: int = 0  # rejected earlier with the same identity
    over_limit: int = 0  # releasable, but past CASE_LIMIT: offered by a later scan
    oversized_unfound: int = 0


class Proposal:
    def __init__(
        self,
        client: redis.Redis,
        now_ms: int,
        *,
        case_ttl_ms: int,
        retention_ms: int,
        limit: int | None = None,
    ) -> None:
        self.limit = CASE_LIMIT if limit is None else limit
        self.store = CaseStore(client, retention_ms=retention_ms)
        self.case_id = new_case_id(now_ms)
        self.now_ms = now_ms
        self.expires_ms = now_ms + case_ttl_ms
        self.stats = ProposalStats()
        self._buffer: list[CaseLock] = []
        self.digests: dict[bytes, BigKey] = {}
        self._taken = 0  # locks sent to the case, before Redis leaves some out

    def add(self, finding: Finding) -> None:
        if not finding.releasable:
            return
        if self._taken >= self.limit:
            self.stats.over_limit += 1
            return
        lock = CaseLock.from_finding(finding)
        if lock.big is not None:
            digested = self._digested(lock, lock.big)
            if digested is None:
                return
            lock = digested
        self._taken += 1
        self._buffer.append(lock)
        if len(self._buffer) >= BATCH:
            self.flush()

    def _digested(self, lock: CaseLock, big: BigKey) -> CaseLock | None:
        """An oversized lock with its sha256 (the key read whole only if it is offered), or None."""
        why = self.store.held_back(lock, self.case_id, self.now_ms)
        if why == "in_case":
            self.stats.in_live_case += 1
        elif why == "snoozed":
            self.stats.snoozed += 1
        if why:
            return None
        read, _ = oversized.digested(self.store.client, big)
        if read is None:
            self.stats.oversized_unfound += 1
            return None
        self.digests[lock.key] = read
        return replace(lock, big=read)

    def flush(self) -> None:
        locks, self._buffer = self._buffer, []
        got: Added = self.store.add(self.case_id, locks, self.now_ms, self.expires_ms)
        s = self.stats
        s.added += got.added
        s.in_live_case += got.in_live_case
        s.snoozed += got.snoozed

    def finish(self) -> Case | None:
        self.flush()
        if not self.stats.added:
            return None
        return self.store.finish(self.case_id, self.now_ms, self.summary())

    def abandon(self) -> None:
        self._buffer = []
        if self.stats.added:
            self.store.abandon(self.case_id)

    def summary(self) -> dict[str, object]:
        s = self.stats
        out: dict[str, object] = {
            "locks": s.added,
            "already_in_a_live_case": s.in_live_case,
            "snoozed_after_rejection": s.snoozed,
        }
        if s.over_limit:
            out["over_limit"] = s.over_limit
        if s.oversized_unfound:
            out["oversized_not_offered"] = s.oversized_unfound
        return out
