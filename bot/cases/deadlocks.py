"""The deadlock step of a scan tick (`bot.cases.opening.scan_and_propose`).

During the scan, `locks` (`bot.evidence.deadlock.RedissonLocks`) sees every Redisson lock. Once
the last batch is counted and before the scan is recorded (`before_commit`), the fair-lock
queues are read and each wait-for cycle becomes one `deadlock` finding (`bot.evidence.deadlock`):

- it is shown to the scan's `on_finding` (the case proposal, the CLI's JSON), like any finding;
- it takes the place of its lock in the scan's kept list (the lock is listed once, as the
  deadlock) and in the verdict counts (that lock counts as `deadlock`, not as what it was);
- the scan's summary carries `deadlocks`, what the check covered.

So the recorded summary, the exit code and the case all include the deadlock on the first scan.
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
    """The scan tick's listeners: `seen` (the scan's `on_finding`: the proposal, then the
    caller's), `locks` (its `on_redisson`) and `before_commit`."""

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
        """Find the deadlocks and put them in `result` (see the module docstring); then send
        the proposal's buffered locks to its case."""
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
    """The deadlock findings into the kept list (first; the evidence ranks them), the counts and
    the flagged digest (`ScanResult.reclassify`: `replaced[i]` is what `findings[i]` was)."""
    keys = {f.key for f in findings}
    for f, was in zip(findings, replaced, strict=True):
        result.reclassify(f.key, was, Reason.DEADLOCK)
    rest = [f for f in result.worst if f.key not in keys]
    result.worst = (findings + rest)[: max(keep, len(findings))]
