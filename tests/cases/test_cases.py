"""Approval cases: what was shown is stored exactly, and every decision has exactly one winner."""

from __future__ import annotations

import threading

import pytest
import redis

from bot.cases.case import CaseLock, State, check_case_id
from bot.cases.case_store import CaseStore
from bot.core.errors import CaseError
from bot.core.model import Layout, Reason
from bot.store.keyspace import OPEN_LOCKS

NOW = 1_800_000_000_000
HOUR = 3_600_000


def lock(key: bytes, identity: bytes = b"tok", reason: Reason = Reason.INFINITE_TTL) -> CaseLock:
    return CaseLock(
        key=key,
        layout=Layout.STRING,
        identity=identity,
        reason=reason,
        ttl_ms=-1,
        observed_ms=NOW,
        held_seconds=1234.5,
        owner="host a",
    )


def test_case_keeps_exact_bytes_of_binary_keys_and_identities(r: redis.Redis) -> None:
    store = CaseStore(r, retention_ms=HOUR)
    weird = lock(b"\x17\x00<!channel>\xff", identity=b"\x00\xfe*&<>")
    case = store.open([weird], NOW, HOUR)
    assert case is not None
    assert case.state is State.PENDING
    assert case.locks == (weird,)
    assert store.get(case.id) == case


def test_no_duplicate_case_for_locks_already_in_an_open_case(r: redis.Redis) -> None:
    store = CaseStore(r, retention_ms=HOUR)
    first = store.open([lock(b"lock:a"), lock(b"lock:b")], NOW, HOUR)
    assert first is not None
    assert store.open([lock(b"lock:a"), lock(b"lock:b")], NOW + 1000, HOUR) is None
    second = store.open([lock(b"lock:a"), lock(b"lock:c")], NOW + 2000, HOUR)
    assert second is not None
    assert [lk.key for lk in second.locks] == [b"lock:c"]


def test_locks_of_an_expired_or_closed_case_can_be_proposed_again(r: redis.Redis) -> None:
    store = CaseStore(r, retention_ms=HOUR)
    first = store.open([lock(b"lock:a")], NOW, 60_000)
    assert first is not None
    again = store.open([lock(b"lock:a")], NOW + 61_000, 60_000)  # the first one expired
    assert again is not None
    assert store.transition(again.id, State.PENDING, State.REJECTED, NOW + 62_000) == "ok"
    store.close(again, NOW + 62_000)
    assert r.hget(OPEN_LOCKS, b"lock:a") is None
    assert store.open([lock(b"lock:a")], NOW + 63_000, 60_000) is not None


def test_expired_case_cannot_be_approved(r: redis.Redis) -> None:
    store = CaseStore(r, retention_ms=HOUR)
    case = store.open([lock(b"lock:a")], NOW, 60_000)
    assert case is not None
    assert store.transition(case.id, State.PENDING, State.APPROVED, NOW + 60_000) == "expired"
    assert store.get(case.id).state is State.EXPIRED  # type: ignore[union-attr]


def test_second_decision_is_refused_with_the_state_that_won(r: redis.Redis) -> None:
    store = CaseStore(r, retention_ms=HOUR)
    case = store.open([lock(b"lock:a")], NOW, HOUR)
    assert case is not None
    assert store.transition(case.id, State.PENDING, State.REJECTED, NOW, decided_by="ann") == "ok"
    assert store.transition(case.id, State.PENDING, State.APPROVED, NOW) == "rejected"
    assert store.transition("LG-000000-000000", State.PENDING, State.APPROVED, NOW) == "missing"


@pytest.mark.real
def test_concurrent_approvals_have_exactly_one_winner(
    real_redis: redis.Redis, redis_server: object
) -> None:
    store = CaseStore(real_redis, retention_ms=HOUR)
    case = store.open([lock(b"lock:a")], NOW, HOUR)
    assert case is not None
    results: list[str] = []
    barrier = threading.Barrier(8)

    def click(i: int) -> None:
        client = redis_server.client()  # type: ignore[attr-defined]
        mine = CaseStore(client, retention_ms=HOUR)
        barrier.wait()
        results.append(
            mine.transition(case.id, State.PENDING, State.APPROVED, NOW, decided_by=f"user{i}")
        )

    threads = [threading.Thread(target=click, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["approved"] * 7 + ["ok"]


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "LG-1",
        "LG-261129-abcdef; rm",
        "lg-261129-abcdef ; x",
        "LG-261129-ABCDEG",
        "../etc",
        "LG-261129-abcdeg",
    ],
)
def test_malformed_case_ids_are_refused(bad: str) -> None:
    with pytest.raises(CaseError, match="malformed case id"):
        check_case_id(bad)


@pytest.mark.parametrize("typed", ["lg-261129-abcdef", "LG-261129-ABCDEF", " Lg-261129-AbCdEf"])
def test_a_case_id_in_another_case_is_the_same_case(typed: str) -> None:
    assert check_case_id(typed) == "LG-261129-abcdef"


def test_well_formed_case_id_is_accepted() -> None:
    assert check_case_id(" LG-261129-abcdef ") == "LG-261129-abcdef"
