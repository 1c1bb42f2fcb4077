"""Who may start a `/lockguard scan` now: one at a time per replica, and only so many a minute.
Any member can type a slash command, so scans are bounded before any work is queued; across
replicas the scan lease in Redis does the same.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from bot.core.display import duration
from bot.slack.blocks.text import mention, redis_text

#: Slash scans one person may start in a window, and all people together.
PER_USER = 5
OVERALL = 20
WINDOW_SECONDS = 60.0
#: People whose recent scans are remembered (older entries are dropped first).
MAX_PEOPLE = 1000


@dataclass(frozen=True, slots=True)
class Running:
    user: str
    pattern: str  # as typed ("" for the configured patterns)
    since: float


class ScanGate:
    def __init__(
        self,
        *,
        per_user: int = PER_USER,
        overall: int = OVERALL,
        window: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._per_user, self._overall, self._window = per_user, overall, window
        self._clock = clock
        self._lock = threading.Lock()
        self._all: deque[float] = deque()
        self._by_user: dict[str, deque[float]] = {}
        self.running: Running | None = None

    def enter(self, user: str, pattern: str) -> str | None:
        """None when `user` may start a scan now (running until `leave`), else why not."""
        with self._lock:
            now = self._clock()
            if self.running is not None:
                r = self.running
                what = f" of {redis_text(r.pattern, 200)}" if r.pattern else ""
                return (
                    f"A scan{what} is running, started by {mention(r.user)} "
                    f"{duration(now - r.since)} ago; its findings are posted when it "
                    "ends. No second scan was started."
                )
            mine = self._recent(self._by_user.get(user, deque()), now)
            every = self._recent(self._all, now)
            if len(mine) >= self._per_user:
                return self._slow(
                    f"at most {self._per_user} scans a minute per person",
                    mine[0] + self._window - now,
                )
            if len(every) >= self._overall:
                return self._slow(
                    f"at most {self._overall} slash scans a minute in all",
                    every[0] + self._window - now,
                )
            mine.append(now)
            every.append(now)
            self._by_user.pop(user, None)
            self._by_user[user] = mine  # most recent last: the oldest go first
            while len(self._by_user) > MAX_PEOPLE:
                del self._by_user[next(iter(self._by_user))]
            self.running = Running(user, pattern, now)
            return None

    def leave(self, *, refund: bool = False) -> None:
        """With `refund` it never ran: a member who may not scan cannot use up the limits."""
        with self._lock:
            running, self.running = self.running, None
            if refund and running is not None:
                mine = self._by_user.get(running.user)
                for times in (mine, self._all):
                    if times and times[-1] == running.since:
                        times.pop()

    def _recent(self, times: deque[float], now: float) -> deque[float]:
        while times and times[0] <= now - self._window:
            times.popleft()
        return times

    @staticmethod
    def _slow(rule: str, wait: float) -> str:
        return (
            f"Not started: {rule}. Try again in {duration(max(wait, 1.0))}; the last "
            "scan's findings are in the channel."
        )
