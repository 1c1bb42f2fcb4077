"""A deadlock found after the scan counted its lock: the lock is counted once, as `deadlock`, in
the verdict counts and in the flagged digest (the Slack findings message is sent again when the
digest changes, so a lock that turned into a deadlock must change it)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot.cases.deadlocks import add
from bot.core.model import FINDING_REASONS, Reason
from bot.scan.result import ScanResult, flagged_mark
from tests.evidence.test_worst_record import finding


@pytest.mark.parametrize("was", [Reason.HEALTHY, Reason.STALE_LEASE])
def test_a_lock_found_deadlocked_is_counted_and_digested_as_a_deadlock(was: Reason) -> None:
    lock, other = b"lock:a", b"lock:b"
    result = ScanResult()
    for key, reason in ((lock, was), (other, Reason.INFINITE_TTL)):
        result.by_reason[reason] += 1
        result.worst.append(finding(key, reason))
    seen = ((lock, was), (other, Reason.INFINITE_TTL))
    result.flagged_digest = sum(flagged_mark(k, r) for k, r in seen if r in FINDING_REASONS)
    deadlock = replace(finding(lock), reason=Reason.DEADLOCK)
    add(result, [deadlock], (was,), keep=10)
    assert result.by_reason[was] == 0
    assert result.by_reason[Reason.DEADLOCK] == 1
    assert result.findings == 2
    expected = flagged_mark(lock, Reason.DEADLOCK) + flagged_mark(other, Reason.INFINITE_TTL)
    assert result.flagged_digest == expected % 2**64
    assert [f.key for f in result.worst] == [lock, other]
