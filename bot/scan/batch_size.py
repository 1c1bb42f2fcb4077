"""The size of a scan's next batch, so that one call holds Redis for about `target_us`.

Redis runs one command at a time: while a batch script runs, the application waits. So a batch
is sized by the server time the calls before measured (µs per slot SCAN visits, keys per slot,
µs per key read), not by a fixed count. Estimates rise fast and fall slowly: one slow call
shrinks the next at once. Pure: no clock, no Redis.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.pacing import DEFAULT_BUDGET, UNPACED

#: Server µs one batch call aims at, at the default budget and below (well under 1 ms).
TARGET_US = 500
MIN_COUNT = 10  # redis-cli's own default
FIRST_COUNT = 20  # before anything was measured
#: Server µs per key read assumed until a call has read one.
FIRST_KEY_US = 10.0
_UP, _DOWN = 0.6, 0.2  # weight of a new measure above / below the estimate
_FLOOR = 1e-3  # µs: no estimate is zero


def target_for(budget: float | None) -> float:
    """The server time (µs) each call aims at under a scan `budget` (None: no pacer):
    `TARGET_US` at the default budget and below, up to twice that unpaced. Fewer, longer calls
    cost less per lock, but the application's p99 pays for it."""
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
