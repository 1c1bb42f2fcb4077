"""What the pacer is told a call cost (`bot.core.pacing`): a batch script's own measure is not
all it holds Redis for (dispatch, arguments, the reply), and lease writes sent behind a call in
flight cost server time too. What a user of the budget notices: the writes count against the
budget though nothing waits while they are in flight, and the next pause waits for them."""

from __future__ import annotations

import math

import pytest

from bot.core.pacing import (
    HSET_COMMAND_S,
    HSET_RECORD_S,
    SCRIPT_FIXED_S,
    SCRIPT_SCALE,
    Pacer,
    hset_cost,
    script_cost,
)
from tests.core.test_pacing import FakeClock, pacer


def test_a_script_costs_more_than_it_measured_itself() -> None:
    assert script_cost(0.0005) == pytest.approx(0.0005 * SCRIPT_SCALE + SCRIPT_FIXED_S)
    assert script_cost(0.0005) > 0.0005
    assert script_cost(0.001) > script_cost(0.0005)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan])
def test_a_script_that_measured_nothing_still_costs_its_dispatch(bad: float) -> None:
    assert script_cost(bad) == pytest.approx(SCRIPT_FIXED_S)


def test_a_lease_write_costs_by_its_records_and_commands() -> None:
    assert hset_cost(1000, 2) == pytest.approx(1000 * HSET_RECORD_S + 2 * HSET_COMMAND_S)
    assert hset_cost(0, 0) == 0.0
    assert hset_cost(-5, -1) == 0.0


def test_counted_writes_do_not_wait_now_but_the_next_pause_waits_for_them() -> None:
    clock = FakeClock()
    p = pacer(0.25, clock)
    p.count(0.001)  # sent behind a call in flight: nothing may be slept here
    assert clock.slept == []
    assert p.busy_s == pytest.approx(0.001)
    clock.now += 0.001
    p.pause(0.001)  # the call in flight ends: 2 ms held, at 0.25 that is 8 ms in all
    assert clock.slept == [pytest.approx(0.006)]  # 2 ms went by since the first began


def test_counting_adds_to_the_share_it_keeps() -> None:
    """A scan whose lease writes ride behind its scripts: without the writes counted, its share
    would be the budget plus the writes'; counted, it stays within the budget."""
    clock = FakeClock()
    p = pacer(0.25, clock)
    started = clock.now
    held = 0.0
    for i in range(3000):
        if i % 10 == 0:
            p.count(0.0003)
            held += 0.0003
        clock.now += 0.0005
        held += 0.0005
        p.pause(0.0005)
    assert held / (clock.now - started) == pytest.approx(0.25, rel=0.03)


def test_unpaced_counts_but_never_waits() -> None:
    slept: list[float] = []
    p = Pacer(1.0, sleep=slept.append)
    p.count(0.01)
    p.pause(0.01)
    assert slept == []
    assert p.busy_s == pytest.approx(0.02)
