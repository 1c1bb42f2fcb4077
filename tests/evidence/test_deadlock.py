"""True deadlocks on a real redis-server, planted exactly as Redisson's fair lock writes them
(`RedissonFairLock.tryLockInnerAsync`): the lock hash `<name>` with `<uuid>:<threadId>` -> count
and a watchdog TTL, the queue `redisson_lock_queue:{<name>}` of waiting `<uuid>:<threadId>`
(RPUSH, first in line first) and the zset `redisson_lock_timeout:{<name>}` of their deadlines
(ms). A cycle is one `deadlock` finding on the first scan, naming its locks and holders in order,
in `scan --json`, the table and a case; approving it releases exactly the proposed lock; a cycle
broken before approval leaves every key as it was."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
import redis

from bot.core.model import Finding, Layout, Reason
from bot.report.scan import Offers
from bot.scan.result import ScanResult
from tests.evidence.test_evidence import dumps, env
from tests.test_cli_scan_notes import rows, run

__all__ = ["env"]  # the fixture, taken from the evidence tests

pytestmark = pytest.mark.real
U1 = "3f2a9b1c-0d4e-4f5a-8b6c-7d8e9f0a1b2c"
U2 = "9c1d2e3f-4a5b-4c6d-8e7f-0a1b2c3d4e5f"
U3 = "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"
A, B, C = f"{U1}:1".encode(), f"{U2}:7".encode(), f"{U3}:9".encode()
WAIT_MS = 300_000  # Redisson's default fairLockWaitTimeout (threadWaitTime)


def server_ms(r: redis.Redis) -> int:
    s, us = r.time()
    return int(s) * 1000 + int(us) // 1000


def hold(r: redis.Redis, name: bytes, holder: bytes, lease_ms: int = 30_000) -> None:
    """`name` acquired by `holder`: HSET holder 1, PEXPIRE lease (the watchdog's 30 s)."""
    r.hset(name, holder, b"1")
    r.pexpire(name, lease_ms)


def queue(r: redis.Redis, name: bytes, *waiting: bytes, deadline_ms: int | None = None) -> None:
    """Threads queued for `name` as Redisson queues them: each RPUSHed after its ZADD, its
    deadline the prior's (or the lock's PTTL) plus the wait time, in ms of the client's clock."""
    now = server_ms(r)
    last = now + max(int(r.pttl(name)), 0)
    for w in waiting:
        last = deadline_ms if deadline_ms is not None else last + WAIT_MS
        r.zadd(b"redisson_lock_timeout:{" + name + b"}", {w: last})
        r.rpush(b"redisson_lock_queue:{" + name + b"}", w)


def scan(expect: int = 1) -> dict[str, Any]:
    code, out = run("scan", "--json")
    assert code == expect, out
    doc: dict[str, Any] = json.loads(out)
    return doc


def deadlocks(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in doc["findings"] if f["reason"] == "deadlock"]


def cycle(f: dict[str, Any]) -> list[tuple[str, str]]:
    return [(link["key"], link["holder"]) for link in f["cycle"]]


def test_a_two_lock_cycle_is_one_finding_on_the_first_scan(env: redis.Redis) -> None:
    hold(env, b"lock:a", A)
    hold(env, b"lock:b", B)
    queue(env, b"lock:a", B)  # B (holding lock:b) waits for lock:a
    queue(env, b"lock:b", A, C)  # A (holding lock:a) waits for lock:b; so does C
    before = dumps(env)
    doc = scan()
    found = deadlocks(doc)
    assert len(found) == 1
    f = found[0]
    # lock:b has the most waiters (2): releasing it lets the most threads go on
    assert f["key"] == "lock:b"
    assert cycle(f) == [("lock:b", B.decode()), ("lock:a", A.decode())]
    assert f["cycle"][1]["key_hex"] == b"lock:a".hex()
    assert f["releasable"] is True
    assert "the most waiters of the cycle (2 queued)" in f["note"]
    assert f["impact"]["waiters"] == 2
    assert doc["findings"][0]["key"] == "lock:b"  # the worst finding
    assert doc["by_reason"]["deadlock"] == 1
    assert doc["by_reason"]["healthy"] == 1  # lock:a: named in the cycle, not a finding
    assert [x["key"] for x in doc["findings"]] == ["lock:b"]
    assert doc["deadlocks"] == {"redisson_locks_checked": 2, "not_checked": 0, "cycles": 1}
    case = doc["case"]
    assert case is not None
    assert [lk["key"] for lk in case["locks"]] == ["lock:b"]
    assert dumps(env) == before  # the scan changed no byte of any key
    code, table = run("scan")
    assert code == 1
    row = rows(table)["lock:b"]
    assert row.startswith("deadlock")
    assert f"lock:b (held by {B.decode()}) waits for lock:a (held by {A.decode()})" in row
    assert "proposed: its queue has the most waiters" in row


def test_a_three_lock_cycle_proposes_the_youngest_when_waiters_tie(env: redis.Redis) -> None:
    hold(env, b"lock:a", A)
    hold(env, b"lock:b", B)
    scan(expect=0)  # both seen: older than anything seen later
    time.sleep(0.01)
    hold(env, b"lock:c", C)
    queue(env, b"lock:b", A)
    queue(env, b"lock:c", B)
    queue(env, b"lock:a", C)
    found = deadlocks(scan())
    assert len(found) == 1
    assert cycle(found[0]) == [
        ("lock:c", C.decode()),
        ("lock:a", A.decode()),
        ("lock:b", B.decode()),
    ]
    assert "it is the youngest" in found[0]["note"]


@pytest.mark.parametrize("shape", ["chain", "deadline-passed", "self-queued"])
def test_no_cycle_no_deadlock(env: redis.Redis, shape: str) -> None:
    hold(env, b"lock:a", A)
    hold(env, b"lock:b", B)
    if shape == "chain":  # A waits for lock:b, whose holder B waits for nothing
        queue(env, b"lock:b", A)
    elif shape == "deadline-passed":  # Redisson drops these waiters at the next try
        queue(env, b"lock:b", A, deadline_ms=server_ms(env) - 1)
        queue(env, b"lock:a", B, deadline_ms=server_ms(env) - 1)
    else:  # a holder queued for its own lock: Redisson re-enters, nobody waits
        queue(env, b"lock:a", A)
        queue(env, b"lock:b", B)
    doc = scan(expect=0)
    assert deadlocks(doc) == []
    assert doc["deadlocks"]["cycles"] == 0
    assert doc["deadlocks"]["redisson_locks_checked"] == 2


def planted_cycle(env: redis.Redis) -> str:
    hold(env, b"lock:a", A)
    hold(env, b"lock:b", B)
    queue(env, b"lock:a", B)
    queue(env, b"lock:b", A, C)
    case = scan()["case"]
    assert case is not None
    return str(case["case_id"])


def test_approving_releases_only_the_proposed_lock(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_id = planted_cycle(env)
    before = dumps(env)
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
    code, text = run("approve", case_id, "--by", "ann")
    assert code == 0, text
    assert "1 of 1 lock(s) released" in text
    after = dumps(env)
    assert b"lock:b" not in after
    assert after == {k: v for k, v in before.items() if k != b"lock:b"}  # no other byte moved


@pytest.mark.parametrize("how", ["waiter-left", "holder-changed"])
def test_a_cycle_broken_before_approval_is_left_alone(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    case_id = planted_cycle(env)
    if how == "waiter-left":  # B gave up waiting for lock:a (Redisson's acquireFailed)
        env.zrem(b"redisson_lock_timeout:{lock:a}", B)
        env.lrem(b"redisson_lock_queue:{lock:a}", 0, B)
    else:  # lock:a released and taken by C, who is not waiting for anything
        env.delete(b"lock:a")
        hold(env, b"lock:a", C)
    before = dumps(env)
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
    code, text = run("approve", case_id, "--by", "ann")
    assert code == 0, text
    assert "0 of 1 lock(s) released" in text
    assert "the deadlock it was approved for is over" in text
    assert dumps(env) == before


def test_a_redisson_owner_renewing_another_lock_is_seen_alive(env: redis.Redis) -> None:
    other = f"{U1}:5".encode()
    env.hset(b"lock:stuck", other, b"1")  # no TTL: flagged on first sight
    env.hset(b"lock:orphan", f"{U2}:3".encode(), b"1")  # an instance renewing nothing
    hold(env, b"lock:busy", A, lease_ms=20_000)  # the same instance U1, its watchdog running
    scan()
    env.pexpire(b"lock:busy", 30_000)  # the watchdog re-arms it between scans
    found = {f["key"]: f["impact"] for f in scan()["findings"]}
    assert found["lock:stuck"]["owner_alive"] is True
    assert found["lock:stuck"]["owner_evidence"] == "instance 3f2a9b1c… renews lock:busy"
    assert found["lock:orphan"]["owner_alive"] is None
    assert found["lock:orphan"]["owner_evidence"] == (
        "no other lock of instance 9c1d2e3f… seen renewed (that does not prove it gone)"
    )


def test_a_cycle_among_many_redisson_locks_is_found_across_read_groups(env: redis.Redis) -> None:
    for i in range(130):  # most Redisson locks have no queue: read in groups, skipped
        hold(env, b"lock:n%03d" % i, f"{U3}:{1000 + i}".encode())
    hold(env, b"lock:a", A)
    hold(env, b"lock:z", B)
    queue(env, b"lock:a", B)
    queue(env, b"lock:z", A)
    queue(env, b"lock:n077", C)  # a waiter who holds nothing: no edge
    found = deadlocks(scan())
    assert [cycle(f) for f in found] == [[("lock:a", A.decode()), ("lock:z", B.decode())]]


def test_past_the_cap_the_scan_says_how_many_redisson_locks_were_not_checked(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bot.evidence.deadlock.LOCK_LIMIT", 2)
    for i in range(3):
        hold(env, b"lock:n%d" % i, f"{U3}:{i}".encode())
    doc = scan(expect=0)
    assert doc["deadlocks"] == {
        "redisson_locks_checked": 2,
        "not_checked": 1,
        "cycles": 0,
        "note": "only the first 2 Redisson locks were checked for deadlocks; 1 more was not",
    }


def test_a_renewed_lock_found_in_a_deadlock_is_not_said_never_offered() -> None:
    """The scan tells the CLI a watchdog-renewed lock as `long_held_renewing` before the cycle
    is known; once it is the deadlock's lock, the 'why not in the case' line does not call it
    never offered (the verdict counts say `deadlock`)."""
    renewed = Finding(
        key=b"lock:b",
        type="hash",
        layout=Layout.REDISSON,
        reason=Reason.LONG_HELD_RENEWING,
        identity=b"x",
        owner="",
        ttl_ms=30_000,
        held_seconds=4_000.0,
        idle_seconds=1,
        observations=5,
        rearms=4,
        counter=None,
        observed_ms=1_796_000_000_000,
    )
    offers = Offers(threshold_s=900)
    offers.add(renewed)
    offers.add(replace(renewed, reason=Reason.DEADLOCK, releasable=True))
    result = ScanResult(scanned=2, by_reason=Counter({Reason.DEADLOCK: 1, Reason.HEALTHY: 1}))
    assert offers.lines(result, None, auto_remediate=True) == []
    result.by_reason[Reason.LONG_HELD_RENEWING] = 1  # another lock of the cycle, still renewed
    assert offers.lines(result, None, auto_remediate=True) == [
        "no case opened: 1 lock(s) still renewed by their owner: never offered"
    ]
