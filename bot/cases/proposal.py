"""One case per scan, at any size: releasable findings stream into the scan's case as it goes.

`Proposal.add` is the scan's `on_finding`; every `cases.BATCH` releasable findings go to Redis in
one script call (`CaseStore.add`), which leaves out locks already in a live case and locks
rejected with the same identity whose snooze has not passed. Memory stays flat however many locks
a crashed deploy abandoned. When the scan completes, `finish` makes the case pending (decidable);
when it fails, `abandon` drops it, so a half-scanned case is never offered to anyone.

With `listed_only` (a scan whose findings a person reads in Slack) the case holds only what the
scan lists: `add` counts the releasable findings, and `add_listed` (the scan's kept list, worst
first, once it completed) puts those it lists in the case. A person approves exactly the locks
they were shown; the rest (`not_listed`) wait for a later case.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import redis

from bot.cases.case import BATCH, Added, Case, CaseLock, CaseStore, new_case_id
from bot.core.model import Finding


@dataclass(slots=True)
class ProposalStats:
    added: int = 0
    in_live_case: int = 0
    snoozed: int = 0  # rejected earlier with the same identity
    not_listed: int = 0  # releasable, but beyond what the scan lists (`listed_only`)


class Proposal:
    def __init__(
        self,
        client: redis.Redis,
        now_ms: int,
        *,
        case_ttl_ms: int,
        retention_ms: int,
        listed_only: bool = False,
    ) -> None:
        self.listed_only = listed_only
        self.store = CaseStore(client, retention_ms=retention_ms)
        self.case_id = new_case_id(now_ms)
        self.now_ms = now_ms
        self.expires_ms = now_ms + case_ttl_ms
        self.stats = ProposalStats()
        self._buffer: list[CaseLock] = []

    def add(self, finding: Finding) -> None:
        if not finding.releasable:
            return
        if self.listed_only:  # taken back by `add_listed` for each one the scan lists
            self.stats.not_listed += 1
            return
        self._buffer.append(CaseLock.from_finding(finding))
        if len(self._buffer) >= BATCH:
            self.flush()

    def add_listed(self, listed: Iterable[Finding]) -> None:
        """`listed_only`: the releasable findings the scan lists (its kept list, in order) go
        in the case; only they."""
        for finding in listed:
            if not finding.releasable:
                continue
            self.stats.not_listed = max(self.stats.not_listed - 1, 0)
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
        out: dict[str, object] = {
            "locks": s.added,
            "already_in_a_live_case": s.in_live_case,
            "snoozed_after_rejection": s.snoozed,
        }
        if self.listed_only:
            out["not_listed"] = s.not_listed
        return out
