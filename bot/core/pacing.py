"""Pacing: how long lockguard waits after a call so that it uses at most its share of Redis.

Redis runs one command at a time: while lockguard's batch script runs, the application waits.
Each call is kept short (`bot.scan.batch_size`); the budget (`LOCKGUARD_SCAN_BUDGET`, a fraction
in (0, 1]) caps how much of Redis's time a scan or a release takes in all. After each call the
caller says how much server time it took (`Pacer.pause`; `Pacer.count` for a call sent behind
one still in flight, whose wait comes at the next pause), and the pacer waits so that, over the
calls of the last `window_s` seconds, busy / (busy + idle) stays at or under the budget. Time
the caller spends on its own work (classifying a batch, writing records) counts as idle, so a
pacer only waits for what the caller's own work did not already leave to the application.

Bounded whatever it is told: a negative, zero or NaN measure counts as 0, one longer than the
window (or infinite) as the window; no wait is longer than `max_wait_s` (the scan lease, 60 s,
is renewed between waits: `bot.scan.loop`); a clock that goes backwards starts the window
afresh. Pure but for the clock and the sleep, both injected.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

#: A budget of 1 (or `off`): no pacing, lockguard's calls follow each other at once.
UNPACED = 1.0
#: The default budget: half of Redis's time (docs/settings.md, "Scan budget": why half, not
#: a quarter).
DEFAULT_BUDGET = 0.5
#: The calls whose server time counts: those that ended in the last second.
WINDOW_S = 1.0
#: The longest one wait may be (a call reported as very slow is followed by waits this long
#: until it leaves the window).
MAX_WAIT_S = 0.5
#: What a batch script costs Redis beyond the time it measures itself (between its first and
#: last TIME): the call's dispatch, its arguments, the reply's encoding. Fitted from `INFO
#: commandstats` (EVALSHA usec) against the scripts' own totals, two calls a batch, at 300k and
#: 1M locks, paced and not (two batch sizes), on a quiet server: x1.09 + 5 us, within 1%.
#: Counted as x1.1 + 15 us: 3-5% over that (a sparse keyspace, 30k locks in 630k keys, 11%),
#: since an application's load slows what the scripts do not time themselves, and the budget
#: is a cap (at x1.1 + 5 us a 1M scan under the probe bench's load took 51% at a budget of 50%).
SCRIPT_SCALE, SCRIPT_FIXED_S = 1.1, 15e-6
#: A tenure-table HSET's server time, fitted the same way: 0.55 us a record, 2 us a command.
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
    """Waits after each call so that lockguard's share of the server stays within `budget`.
    `waited_s` and `busy_s` add up what it waited and what the calls measured."""

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
        """A call just ended that held Redis `busy_s` seconds: how long to wait before the next
        (recorded as waited: the caller sleeps it)."""
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
        """`busy_s` added to the window; the time now, or None when not paced."""
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
        """`wait_after`, slept. Call it with no MULTI open. Calls already in flight (a scan's
        reads sent ahead) run during the wait; their server time counts when they are measured,
        so the window's share still holds."""
        wait = self.wait_after(busy_s)
        if wait > 0:
            self.sleep(wait)


def script_cost(measured_s: float) -> float:
    """A batch script's server time from the time it measured itself (`SCRIPT_SCALE`)."""
    return _bounded(measured_s, math.inf) * SCRIPT_SCALE + SCRIPT_FIXED_S


def hset_cost(records: int, commands: int) -> float:
    """The server time of `commands` tenure-table HSETs writing `records` records in all."""
    return max(records, 0) * HSET_RECORD_S + max(commands, 0) * HSET_COMMAND_S


def _bounded(busy_s: float, most: float) -> float:
    if not isinstance(busy_s, int | float) or math.isnan(busy_s) or busy_s <= 0:
        return 0.0
    return min(float(busy_s), most)


def unpaced() -> Pacer:
    """A pacer that never waits (it still adds the calls' server time up)."""
    return Pacer(UNPACED)
