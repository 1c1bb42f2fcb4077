"""How long lockguard waits after a call so that it uses at most its share of Redis.

Redis runs one command at a time, so the budget (`LOCKGUARD_SCAN_BUDGET`, in (0, 1]) caps
busy / (busy + idle) over the calls of the last `window_s`. The caller reports each call's server
time (`pause`; `count` for a call still in flight); its own work counts as idle. Bounded whatever
it is told: a negative or NaN measure is 0, a huge one the window; no wait exceeds `max_wait_s`
(the scan lease is renewed between waits); a clock going backwards restarts the window.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

#: A budget of 1 (or `off`): no pacing, lockguard's calls follow each other at once.
UNPACED = 1.0
#: The default budget: half of Redis's time (docs/settings.md says why).
DEFAULT_BUDGET = 0.5
#: The calls whose server time counts: those that ended in the last second.
WINDOW_S = 1.0
#: The longest one wait may be.
MAX_WAIT_S = 0.5
#: A batch script's cost to Redis beyond the time it measures itself (dispatch, arguments,
#: reply), fitted from `INFO commandstats` and rounded up: the budget is a cap.
SCRIPT_SCALE, SCRIPT_FIXED_S = 1.1, 15e-6
#: A tenure-table HSET's server time, fitted the same way.
HSET_RECORD_S, HSET_COMMAND_S = 0.55e-6, 2e-6
BUDGET_EXPECTED = "a fraction of Redis's time in (0, 1], e.g. 0.25, or off (1: unpaced)"


def parse_budget(value: object) -> float:
    """`LOCKGUARD_SCAN_BUDGET` as a number in (0, 1]: `off` is 1 (unpaced). ValueError else."""
    if isinstance(value, bool):
        raise ValueError(f"expected {BUDGET_EXPECTED}")
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "off":
            return UNPACED
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"expected {BUDGET_EXPECTED}") from None
    if not isinstance(value, int | float) or not math.isfinite(value) or not 0 < value <= 1:
        raise ValueError(f"expected {BUDGET_EXPECTED}")
    return float(value)


class Pacer:
    def __init__(
        self,
        budget: float = DEFAULT_BUDGET,
        *,
        window_s: float = WINDOW_S,
        max_wait_s: float = MAX_WAIT_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.budget = parse_budget(budget)
        self.window_s, self.max_wait_s = window_s, max_wait_s
        self.clock, self.sleep = clock, sleep
        self.busy_s = 0.0
        self.waited_s = 0.0
        self._calls: deque[tuple[float, float, float]] = deque()  # (start, end, busy)
        self._busy_in_window = 0.0

    @property
    def paced(self) -> bool:
        return self.budget < UNPACED

    def wait_after(self, busy_s: float) -> float:
        """A call just held Redis `busy_s` seconds: how long to wait (the caller sleeps it)."""
        now = self._record(busy_s)
        if now is None:
            return 0.0
        while self._calls[0][1] < now - self.window_s:
            self._busy_in_window -= self._calls.popleft()[2]
        if len(self._calls) == 1:
            self._busy_in_window = self._calls[0][2]  # no rounding left over from the calls gone
        first_start = self._calls[0][0]
        wait = first_start + self._busy_in_window / self.budget - now
        wait = min(max(wait, 0.0), self.max_wait_s)
        self.waited_s += wait
        return wait

    def count(self, busy_s: float) -> None:
        """A call sent behind one still in flight will hold Redis `busy_s` seconds: counted now,
        waited for at the next `pause`."""
        self._record(busy_s)

    def _record(self, busy_s: float) -> float | None:
        busy = _bounded(busy_s, self.window_s)
        self.busy_s += busy
        if not self.paced:
            return None
        now = self.clock()
        if self._calls and now < self._calls[-1][1]:  # the clock went backwards
            self._calls.clear()
            self._busy_in_window = 0.0
        self._calls.append((now - busy, now, busy))
        self._busy_in_window += busy
        return now

    def pause(self, busy_s: float) -> None:
        """`wait_after`, slept. Call it with no MULTI open."""
        wait = self.wait_after(busy_s)
        if wait > 0:
            self.sleep(wait)


def script_cost(measured_s: float) -> float:
    return _bounded(measured_s, math.inf) * SCRIPT_SCALE + SCRIPT_FIXED_S


def hset_cost(records: int, commands: int) -> float:
    return max(records, 0) * HSET_RECORD_S + max(commands, 0) * HSET_COMMAND_S


def _bounded(busy_s: float, most: float) -> float:
    if not isinstance(busy_s, int | float) or math.isnan(busy_s) or busy_s <= 0:
        return 0.0
    return min(float(busy_s), most)


def unpaced() -> Pacer:
    return Pacer(UNPACED)
