"""The release lease (`bot.cases.release_lease`), on a real redis-server: held and marked while a
case is released, given back at the end, waited for by a resume when its holder was killed a
moment ago, and refused to a resume while a live process holds it."""

from __future__ import annotations

import time

import pytest
import redis

from bot.cases.approval import approve
from bot.cases.case import State
from bot.cases.release_lease import (
    HELD,
    LAPSED,
    LEASED_FIELD,
    NEVER,
    ReleaseBusyError,
    ReleaseLease,
    lease_states,
)
from bot.store.keyspace import case_key, releasing_key
from tests.cases.test_never_delete import LIVE, scans


def open_case(r: redis.Redis, key: bytes = b"lock:a") -> str:
    r.set(key, b"tok-" + key)
    _, case = scans(r, 2)[-1]
    assert case is not None
    return case.id


@pytest.mark.real
def test_an_approval_holds_and_marks_the_lease_and_gives_it_back(real_redis: redis.Redis) -> None:
    case_id = open_case(real_redis)
    assert lease_states(real_redis, [case_id]) == {case_id: NEVER}
    seen: list[str] = []
    rep = approve(
        real_redis,
        case_id,
        "ann",
        LIVE,
        progress=lambda done, total: seen.append(lease_states(real_redis, [case_id])[case_id]),
    )
    assert rep.case.state is State.RELEASED
    assert seen == [HELD]  # while it released
    assert not real_redis.exists(releasing_key(case_id))  # given back at once
    assert real_redis.hget(case_key(case_id), LEASED_FIELD) == b"1"
    assert lease_states(real_redis, [case_id]) == {case_id: LAPSED}  # closed: nothing resumes it


@pytest.mark.real
def test_a_resume_waits_for_a_killed_holders_lease_and_refuses_a_live_one(
    real_redis: redis.Redis,
) -> None:
    case_id = open_case(real_redis)
    # A process that was killed a moment ago: its lease lapses in 1 s, then the resume runs.
    real_redis.set(releasing_key(case_id), b"gone:1|abc", px=1_000)
    real_redis.hset(case_key(case_id), "state", "approved")
    start = time.monotonic()
    rep = approve(real_redis, case_id, "ann", LIVE, resume=True)
    assert 0.8 <= time.monotonic() - start < 3
    assert rep.counts == {"released": 1}
    # A live holder renews its lease: a resume waits one lease period, then says who holds it.
    other = open_case(real_redis, b"lock:b")
    real_redis.hset(case_key(other), "state", "approved")
    busy = pytest.raises(ReleaseBusyError, match=r"is being released by .+ right now")
    with ReleaseLease(real_redis, other, renew_every_s=0.2), busy:
        approve(real_redis, other, "ann", LIVE, resume=True)
    assert real_redis.get(b"lock:b") is not None  # the live holder's to release: untouched
    assert approve(real_redis, other, "ann", LIVE, resume=True).counts == {"released": 1}
