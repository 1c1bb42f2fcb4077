"""The deadlock step of a scan tick: once the last batch is counted and before the scan is
recorded, each wait-for cycle becomes one `deadlock` finding, shown to `on_finding` like any
other and taking its lock's place in the kept list and the verdict counts (the summary carries
`deadlocks`, what the check covered). So the recorded summary, the exit code and the case all
include it on the first scan.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import redis

from bot.cases.proposal import Proposal
from bot.core import logs
from bot.core.model import Finding, Reason
from bot.core.rules import Policy
from bot.evidence.deadlock import RedissonLocks, detect
from bot.scan.result import ScanResult

_log = logs.logger("evidence")


class DeadlockStep:
    """The scan's listeners: `seen` (its `on_finding`), `locks` (`on_redisson`), `before_commit`."""

    def __init__(
        self,
        client: redis.Redis,
        policy: Policy,
        keep: int,
        proposal: Proposal | None,
        on_finding: Callable[[Finding], None] | None,
    ) -> None:
        self.client = client
        self.locks = RedissonLocks(policy)
        self.keep = keep
        self.proposal = proposal
        self.on_finding = on_finding

    def seen(self, f: Finding) -> None:
        if self.proposal is not None:
            self.proposal.add(f)
        if self.on_finding is not None:
            self.on_finding(f)

    def before_commit(self, result: ScanResult) -> None:
        """The deadlocks into `result`; then the proposal's buffered locks to its case."""
        found = detect(self.client, self.locks, result.server_time_ms)
        result.deadlocks = found.summary
        if found.findings:
            add(result, list(found.findings), found.replaced, self.keep)
            for f in found.findings:
                self.seen(f)
            logs.event(
                _log,
                "deadlocks_found",
                logging.WARNING,
                cycles=len(found.findings),
                locks=sum(len(f.cycle) for f in found.findings),
            )
        self.locks.seen = {}  # memory back; `renewed` stays for the owners' evidence
        if self.proposal is not None:
            self.proposal.flush()


def add(
    result: ScanResult, findings: list[Finding], replaced: tuple[Reason, ...], keep: int
) -> None:
    """The deadlock findings first in the kept list, and into the counts (`replaced[i]` is what
    `findings[i]` was)."""
    keys = {f.key for f in findings}
    for f, was in zip(findings, replaced, strict=True):
        result.reclassify(f.key, was, Reason.DEADLOCK)
    rest = [f for f in result.worst if f.key not in keys]
    result.worst = (findings + rest)[: max(keep, len(findings))]
