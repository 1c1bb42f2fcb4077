"""One case per scan, at any size: releasable findings stream into the scan's case as it goes.

`Proposal.add` is the scan's `on_finding`; every `cases.BATCH` releasable findings go to Redis in
one script call (`CaseStore.add`), which leaves out locks already in a live case and locks
rejected with the same identity whose snooze has not passed. Memory stays flat however many locks
a crashed deploy abandoned. When the scan completes, `finish` makes the case pending (decidable);
when it fails, `abandon` drops it, so a half-scanned case is never offered to anyone.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from bot.cases.case import BATCH, Added, Case, CaseLock, CaseStore, new_case_id
from bot.core.model import Finding


@dataclass(slots=True)
class ProposalStats:
    added: int = 0
    in_live_case: int = 0
    snoozed: int = 0  # rejected earlier with the same identity


class Proposal:
    def __init__(
        self, client: redis.Redis, now_ms: int, *, case_ttl_ms: int, retention_ms: int
    ) -> None:
        self.store = CaseStore(client, retention_ms=retention_ms)
        self.case_id = new_case_id(now_ms)
        self.now_ms = now_ms
        self.expires_ms = now_ms + case_ttl_ms
        self.stats = ProposalStats()
        self._buffer: list[CaseLock] = []

    def add(self, finding: Finding) -> None:
        if not finding.releasable:
            return
        self._buffer.append(CaseLock.from_finding(finding))
        if len(self._buffer) >= BATCH:
            self.flush()

    def flush(self) -> None:
        """Send the buffered locks to the case (the scan calls it before it is recorded)."""
        locks, self._buffer = self._buffer, []
        got: Added = self.store.add(self.case_id, locks, self.now_ms, self.expires_ms)
        s = self.stats
        s.added += got.added
        s.in_live_case += got.in_live_case
        s.snoozed += got.snoozed

    def finish(self) -> Case | None:
        """The scan completed: the case (if any lock went in) becomes pending."""
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
        return {
            "locks": s.added,
            "already_in_a_live_case": s.in_live_case,
            "snoozed_after_rejection": s.snoozed,
        }
