"""`bot.store.tenure_plan`: a cluster scan's lease plan is read back exactly, and a plan that is not
one this version wrote is no plan (the scan then starts the history afresh, never misreads it)."""

from __future__ import annotations

import fakeredis
import pytest

from bot.store import slots, tenure_plan
from bot.store.keyspace import tenure_plan_key
from bot.store.tenure_plan import NO_TABLE, TenurePlan


@pytest.fixture
def r() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


def three_primaries(gen: int = 4) -> TenurePlan:
    owners = bytearray(slots.SLOTS)
    for s in range(slots.SLOTS):
        owners[s] = 0 if s < 5461 else 1 if s < 10923 else 2
    owners[16383] = NO_TABLE
    return TenurePlan(
        gen, (0, 5461, 10923), bytes(owners), ("127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002")
    )


def test_a_saved_plan_is_read_back_exactly(r: fakeredis.FakeRedis) -> None:
    plan = three_primaries()
    tenure_plan.save(r, plan)  # type: ignore[arg-type]
    assert tenure_plan.load(r, 4) == plan  # type: ignore[arg-type]
    assert plan.table_of(6000) == slots.tenure_table(4, 5461)
    assert slots.slot_of(plan.table_of(6000)) == 5461  # the table is on the slot's primary
    assert plan.node_of(12000) == "127.0.0.1:7002"
    assert plan.node_of(16383) == ""  # no primary served it: no table holds its records
    assert plan.table_of(16383) not in plan.names()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("owners", b"\0" * 100),  # not one byte per slot
        ("owners", b"\x07" * slots.SLOTS),  # a table the list does not have
        ("tables", b"0,x,2"),
        ("tables", b"0,99999,2"),  # not a slot
        ("tables", b""),
    ],
)
def test_a_plan_this_version_did_not_write_is_no_plan(
    r: fakeredis.FakeRedis, field: str, value: bytes
) -> None:
    tenure_plan.save(r, three_primaries())  # type: ignore[arg-type]
    r.hset(tenure_plan_key(4), field, value)
    assert tenure_plan.load(r, 4) is None  # type: ignore[arg-type]


def test_no_plan_before_the_first_scan(r: fakeredis.FakeRedis) -> None:
    assert tenure_plan.load(r, 0) is None  # type: ignore[arg-type]
    assert tenure_plan.load(r, 3) is None  # type: ignore[arg-type]
