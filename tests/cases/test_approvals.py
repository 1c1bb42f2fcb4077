"""Two distinct approvers (LOCKGUARD_REQUIRED_APPROVALS=2): the first approval is recorded and
releases nothing, the same person twice is refused, the second person releases."""

from __future__ import annotations

import threading

import pytest
import redis

from bot.cases.reclaim_config import ReclaimConfig
from bot.config import load_settings
from bot.core.errors import CaseDecidedError, CaseError, SameApproverError
from bot.core.rules import Policy
from bot.engine import Engine
from bot.scan.result import ScanOptions
from tests.conftest import RedisServer
from tests.core.test_layouts import uuid1_hex

POLICY = Policy(stale_threshold_ms=900_000)


def engine(r: redis.Redis, required: int = 2) -> Engine:
    cfg = ReclaimConfig(policy=POLICY, dry_run=False, required_approvals=required)
    return Engine(r, ScanOptions([b"lock:*"], POLICY), cfg, endpoint="redis://test:1/0")


def stuck_case(r: redis.Redis, e: Engine) -> str:
    """A redis-py lock whose uuid1 token says it was taken two hours ago: releasable at once."""
    now_ms = int(r.time()[0]) * 1000
    r.set(b"lock:stuck", uuid1_hex(now_ms - 7_200_000))
    _, case = e.scan()
    assert case is not None
    return case.id


def test_two_people_are_needed_and_the_first_releases_nothing(r: redis.Redis) -> None:
    e = engine(r)
    case_id = stuck_case(r, e)
    first = e.approve(case_id, "U0ANN")
    assert first.waiting
    assert first.counts == {}
    assert [a for a, _ in first.case.approvals] == ["U0ANN"]
    assert first.case.state.value == "pending"
    assert r.exists(b"lock:stuck")

    with pytest.raises(SameApproverError, match="U0ANN has already approved"):
        e.approve(case_id, "U0ANN")
    assert r.exists(b"lock:stuck")

    second = e.approve(case_id, "U0BOB")
    assert not second.waiting
    assert second.released == 1
    assert not r.exists(b"lock:stuck")
    assert second.case.decided_by == "U0BOB"
    assert [a for a, _ in second.case.approvals] == ["U0ANN", "U0BOB"]

    with pytest.raises(CaseDecidedError) as info:
        e.approve(case_id, "U0CAT")
    assert info.value.state == "released"
    assert info.value.decided_by == "U0BOB"


def test_a_case_waiting_for_its_second_approval_can_still_be_rejected(r: redis.Redis) -> None:
    e = engine(r)
    case_id = stuck_case(r, e)
    e.approve(case_id, "U0ANN")
    rejected = e.reject(case_id, "U0BOB", "the batch job is only slow")
    assert rejected.state.value == "rejected"
    with pytest.raises(CaseDecidedError, match="already decided"):
        e.approve(case_id, "U0CAT")
    assert r.exists(b"lock:stuck")


def test_one_approval_is_enough_by_default(r: redis.Redis) -> None:
    e = engine(r, required=1)
    case_id = stuck_case(r, e)
    rep = e.approve(case_id, "U0ANN")
    assert not rep.waiting
    assert rep.released == 1


def test_a_name_with_a_newline_is_refused(r: redis.Redis) -> None:
    e = engine(r)
    case_id = stuck_case(r, e)
    with pytest.raises(CaseError, match="control characters"):
        e.approve(case_id, "ann\n1 bob")


@pytest.mark.real
def test_two_second_approvers_at_once_release_once(
    real_redis: redis.Redis, redis_server: RedisServer
) -> None:
    e = engine(real_redis)
    case_id = stuck_case(real_redis, e)
    e.approve(case_id, "U0ANN")
    outcomes: list[str] = []

    def click(who: str) -> None:
        client = redis_server.client()
        try:
            rep = engine(client).approve(case_id, who)
            outcomes.append("released" if rep.released else "waiting")
        except CaseDecidedError:
            outcomes.append("already decided")
        finally:
            client.close()

    threads = [threading.Thread(target=click, args=(f"U0P{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["already decided"] * 3 + ["released"]


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"LOCKGUARD_REQUIRED_APPROVALS": "3"}, "LOCKGUARD_REQUIRED_APPROVALS"),
        ({"LOCKGUARD_APPROVERS": "U0ANN,ann"}, "LOCKGUARD_APPROVERS"),
        ({"LOCKGUARD_APPROVER_GROUP": "on-call"}, "LOCKGUARD_APPROVER_GROUP"),
    ],
)
def test_bad_approver_settings_are_named(env: dict[str, str], named: str) -> None:
    with pytest.raises(Exception, match=named):
        load_settings(env, env_file=None)


def test_approver_settings_are_read() -> None:
    s = load_settings(
        {
            "LOCKGUARD_APPROVERS": " U0ANN, U0BOB ,U0ANN",
            "LOCKGUARD_APPROVER_GROUP": "S0ONCALL",
            "LOCKGUARD_REQUIRED_APPROVALS": "2",
        },
        env_file=None,
    )
    assert s.approver_ids == ("U0ANN", "U0BOB")
    assert s.reclaim_config().required_approvals == 2
