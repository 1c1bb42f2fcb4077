"""The pacer (`bot.core.pacing`): measured server times in, waits out, on a fake clock. What a
user of the budget notices: lockguard's share of Redis's time over the window stays within the
budget, `off` never waits, and no measure (huge, zero, negative, a clock going backwards) makes
it wait for ever or not at all when it should."""

from __future__ import annotations

import math

import pytest

from bot.core.pacing import (
    BUDGET_EXPECTED,
    DEFAULT_BUDGET,
    MAX_WAIT_S,
    UNPACED,
    WINDOW_S,
    Pacer,
    parse_budget,
)
from bot.scan.loop import REFRESH_EVERY_S
from bot.store.scans import SCAN_LEASE_MS


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def pacer(budget: float, clock: FakeClock, **kw: float) -> Pacer:
    return Pacer(budget, clock=clock, sleep=clock.sleep, **kw)


def call(p: Pacer, clock: FakeClock, busy_s: float, then_work_s: float = 0.0) -> None:
    """A call holding Redis `busy_s` (the clock moves with it), paced, then the caller's own
    work."""
    clock.now += busy_s
    p.pause(busy_s)
    clock.now += then_work_s


@pytest.mark.parametrize(
    ("budget", "busy_ms", "idle_ms"),
    [(0.25, 1.0, 3.0), (0.5, 1.0, 1.0), (0.05, 0.5, 9.5), (0.1, 2.0, 18.0), (1.0, 1.0, 0.0)],
)
def test_one_call_is_followed_by_its_share_of_idle(
    budget: float, busy_ms: float, idle_ms: float
) -> None:
    clock = FakeClock()
    p = pacer(budget, clock)
    assert p.wait_after(busy_ms / 1000) == pytest.approx(idle_ms / 1000)


def test_a_long_scan_uses_the_budget_and_no_more() -> None:
    clock = FakeClock()
    p = pacer(0.25, clock)
    started = clock.now
    for i in range(2000):  # calls of 0.3 to 0.7 ms, the caller's own work 0 to 0.4 ms
        call(p, clock, (3 + i % 5) / 10_000, (i % 5) / 10_000)
    share = p.busy_s / (clock.now - started)
    assert share == pytest.approx(0.25, rel=0.02)
    assert p.waited_s == pytest.approx(sum(clock.slept))


def test_the_callers_own_work_counts_as_idle() -> None:
    """Work the caller does between calls already leaves Redis to the application: the pacer
    only waits for the rest, and not at all when the work alone is long enough."""
    clock = FakeClock()
    p = pacer(0.25, clock)
    for _ in range(100):
        call(p, clock, 0.001, then_work_s=0.002)  # 1 ms busy, 2 ms work: 1 ms more to wait
    assert clock.slept[-1] == pytest.approx(0.001)
    slow = pacer(0.25, clock)
    clock.slept.clear()
    for _ in range(100):
        call(slow, clock, 0.001, then_work_s=0.004)
    assert clock.slept == [pytest.approx(0.003)]  # the first call's; then 20% of the time


def test_calls_older_than_the_window_stop_counting() -> None:
    """A burst long ago does not slow today's calls, and long idle is no credit for a burst:
    only the last window counts."""
    clock = FakeClock()
    p = pacer(0.25, clock)
    p.wait_after(0.4)  # a very slow call: waits at most MAX_WAIT_S
    assert clock.slept == []  # wait_after only says; pause sleeps
    clock.now += WINDOW_S + 5
    assert p.wait_after(0.001) == pytest.approx(0.003)
    clock.now += 60  # idle for a minute: the next call still waits its own share
    assert p.wait_after(0.001) == pytest.approx(0.003)


def test_budget_off_never_waits_but_counts() -> None:
    clock = FakeClock()
    p = pacer(parse_budget("off"), clock)
    for _ in range(10):
        call(p, clock, 0.01)
    assert clock.slept == []
    assert p.waited_s == 0.0
    assert p.busy_s == pytest.approx(0.1)
    assert not p.paced


@pytest.mark.parametrize("busy", [1e9, math.inf, 3600.0])
def test_a_huge_measure_waits_at_most_max_wait(busy: float) -> None:
    clock = FakeClock()
    p = pacer(0.25, clock)
    assert p.wait_after(busy) == MAX_WAIT_S
    clock.now += MAX_WAIT_S
    assert p.wait_after(0.0) == MAX_WAIT_S  # still in the window: waits again, never longer
    clock.now += WINDOW_S * 10
    assert p.wait_after(0.001) == pytest.approx(0.003)  # out of the window: back to normal


@pytest.mark.parametrize("busy", [0.0, -5.0, math.nan])
def test_zero_negative_or_unknown_measures_cost_nothing(busy: float) -> None:
    clock = FakeClock()
    p = pacer(0.25, clock)
    assert p.wait_after(busy) == 0.0
    assert p.busy_s == 0.0


def test_a_clock_going_backwards_starts_the_window_afresh() -> None:
    clock = FakeClock()
    p = pacer(0.25, clock)
    call(p, clock, 0.001)
    clock.now -= 3600  # a clock stepped back an hour
    wait = p.wait_after(0.001)
    assert wait == pytest.approx(0.003)  # neither negative nor an hour
    clock.now += wait
    call(p, clock, 0.001)  # and the pacing goes on from there
    assert clock.slept[-1] == pytest.approx(0.003)


def test_a_wait_never_lets_the_scan_lease_lapse() -> None:
    """The scan renews its lease every REFRESH_EVERY_S between waits; the longest wait must
    leave a wide margin under the lease's life."""
    assert MAX_WAIT_S + REFRESH_EVERY_S < SCAN_LEASE_MS / 1000 / 2


@pytest.mark.parametrize(
    ("text", "budget"),
    [("0.25", 0.25), (" 0.05 ", 0.05), ("1", UNPACED), ("OFF", UNPACED), ("off", UNPACED)],
)
def test_budget_values(text: str, budget: float) -> None:
    assert parse_budget(text) == budget


@pytest.mark.parametrize("text", ["0", "-0.5", "1.5", "nan", "inf", "quarter", "", "25%"])
def test_bad_budgets_say_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        parse_budget(text)
    assert "off" in BUDGET_EXPECTED


def test_the_default_is_half() -> None:
    assert DEFAULT_BUDGET == 0.5
    assert Pacer().budget == DEFAULT_BUDGET
