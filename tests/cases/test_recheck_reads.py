"""The recheck before a case batch is released reads each lock's tenure record again in HMGETs of
at most `READ_CHUNK` fields (a case batch is 500 locks; one HMGET of all of them would be one
long command), and still judges every lock as a scan would, on both backends (`r`)."""

from __future__ import annotations

import pytest
import redis

from bot.cases.case import CaseLock
from bot.cases.recheck import READ_CHUNK, recheck
from bot.core.rules import Policy
from bot.release import Outcome
from bot.scan.loop import run_scan
from bot.scan.result import ScanOptions
from tests.conftest import CountPipelines, named
from tests.core.test_layouts import uuid1_hex

POLICY = Policy(stale_threshold_ms=60_000)
N = 2 * READ_CHUNK + 50


@pytest.fixture
def hmgets(count_pipelines: CountPipelines) -> list[int]:
    """The number of fields each pipelined HMGET asked for."""
    return count_pipelines(lambda stack: [len(a) - 2 for a in named(stack, "HMGET")])


def test_a_big_batch_is_rechecked_in_short_reads(r: redis.Redis, hmgets: list[int]) -> None:
    now_ms = int(r.time()[0]) * 1000
    with r.pipeline(transaction=False) as pipe:
        for i in range(N):  # no expiry, minted two hours ago: releasable on first sight
            pipe.set(b"lock:case:%d" % i, uuid1_hex(now_ms - 7_200_000, node=i + 1))
        pipe.execute()
    result = run_scan(r, ScanOptions([b"lock:*"], POLICY), keep=N)
    locks = sorted((CaseLock.from_finding(f) for f in result.worst), key=lambda lk: lk.key)
    assert len(locks) == N
    r.set(locks[7].key, uuid1_hex(now_ms, node=0xABC))  # re-acquired since the scan
    r.delete(locks[300].key)
    hmgets.clear()
    verdicts = recheck(r, locks, POLICY, [b"lock:*"])
    assert verdicts[7].outcome is Outcome.SKIPPED_REACQUIRED
    assert verdicts[300].outcome is Outcome.ALREADY_GONE
    rest = [v for i, v in enumerate(verdicts) if i not in (7, 300)]
    assert all(v.outcome is None for v in rest)  # each may go to its release script
    assert sum(hmgets) == N
    assert max(hmgets) <= READ_CHUNK
