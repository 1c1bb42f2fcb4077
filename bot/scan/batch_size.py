"""The size of a scan's next batch, chosen so that one call holds Redis for a bounded time.

Redis runs one command at a time: while a batch script runs, the application's own requests
wait. So a batch is sized by the server time its calls measured, not by a fixed key count: the
`BatchSizer` keeps three estimates (server µs per slot a SCAN visits, keys SCAN returns per
slot, server µs per key read) from each call's own measures, and sizes the next call (its SCAN
COUNT, how many keys it may read, how many SCAN calls it may make) so that it should take about
`target_us`. Estimates rise fast and fall slowly, so one slow call shrinks the next at once.
A pure function of the measured times: no clock, no Redis.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.pacing import DEFAULT_BUDGET, UNPACED

#: Server time one batch call aims at (µs) at the default budget and below: well under the 1 ms
#: no call may exceed there.
TARGET_US = 500
#: The smallest SCAN COUNT asked for (redis-cli's own default).
MIN_COUNT = 10
#: The first call's SCAN COUNT, before anything was measured.
FIRST_COUNT = 20
#: Server µs per key read assumed until a call has read one (the scripts take about 5-10 µs).
FIRST_KEY_US = 10.0
_UP, _DOWN = 0.6, 0.2  # weight of a new measure above / below the estimate
_FLOOR = 1e-3  # µs: no estimate is zero


def target_for(budget: float | None) -> float:
    """The server time (µs) each call aims at under a scan `budget` (`bot.core.pacing`; None:
    no pacer): `TARGET_US` at the default budget and below; above it the calls lengthen with
    the budget, to twice that unpaced (`off`: as fast as Redis answers). Each batch costs both
    sides a fixed part (two calls, their system calls and wake-ups, the tenure writes'
    commands), so fewer, longer calls cost less per lock; the application's p99 pays for it,
    which is why the default does not."""
    if budget is None:
        return TARGET_US
    scale = min(max(budget, DEFAULT_BUDGET), UNPACED) / DEFAULT_BUDGET
    return TARGET_US * scale


@dataclass(frozen=True, slots=True)
class Measure:
    """What one call did and how long it held the server."""

    count: int  # the SCAN COUNT it asked for
    calls: int  # SCAN calls it made
    returned: int  # keys SCAN returned
    read: int  # keys it read (their facts and values)
    scan_us: float  # server time of its SCAN calls
    total_us: float  # server time of the whole call


@dataclass(frozen=True, slots=True)
class Size:
    count: int  # SCAN COUNT
    keys: int  # SCAN again while the batch has fewer keys than this
    calls: int  # at most this many SCAN calls


class BatchSizer:
    """Sizes each call from the ones before, within the caps given (the caller's own limits)."""

    def __init__(
        self, *, max_count: int, max_keys: int, max_calls: int, target_us: float = TARGET_US
    ) -> None:
        self.max_count, self.max_keys, self.max_calls = max_count, max_keys, max_calls
        self.target_us = target_us
        self.slot_us: float | None = None  # server µs per slot SCAN visits
        self.density: float | None = None  # keys SCAN returns per slot visited
        self.key_us: float | None = None  # server µs per key read

    def next(self) -> Size:
        if self.target_us <= 0:  # not sized: the caps as they are
            return Size(self.max_count, self.max_keys, self.max_calls)
        if self.slot_us is None or self.density is None or self.key_us is None:
            return Size(min(self.max_count, FIRST_COUNT), self.max_keys, 1)
        per_slot = self.slot_us + self.density * self.key_us  # visited, and its keys read
        count = _clamp(self.target_us / per_slot, MIN_COUNT, self.max_count)
        calls = _clamp(self.target_us / (count * per_slot), 1, self.max_calls)
        keys = _clamp(self.target_us / self.key_us, 1, self.max_keys)
        return Size(count, keys, calls)

    def measured(self, m: Measure) -> None:
        slots = m.calls * m.count
        if slots <= 0:
            return
        self.slot_us = _blend(self.slot_us, max(m.scan_us, 0.0) / slots)
        self.density = _blend(self.density, m.returned / slots)
        if m.read > 0:
            self.key_us = _blend(self.key_us, max(m.total_us - m.scan_us, 0.0) / m.read)
        elif self.key_us is None:
            self.key_us = max(self.slot_us, FIRST_KEY_US)  # nothing read yet


def _blend(old: float | None, new: float) -> float:
    new = max(new, _FLOOR)
    if old is None:
        return new
    weight = _UP if new > old else _DOWN
    return old + weight * (new - old)


def _clamp(value: float, low: int, high: int) -> int:
    return max(low, min(high, int(value))) if high >= low else high
