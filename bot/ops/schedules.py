"""When scheduled jobs run (`LOCKGUARD_SCAN_SCHEDULE`, `LOCKGUARD_DIGEST_SCHEDULE`): a 5-field cron
expression in UTC (or `@daily` and the like), `every 30s` / `5m` / `1h` (1 s to 7 days), or `off`.
Parsing is pure; `make_trigger` builds the APScheduler 3.x trigger, correcting two places where
APScheduler reads a crontab differently from cron: its day-of-week 0 is Monday, not Sunday (the
field is translated to day names), and with both day fields restricted cron runs when EITHER
matches (`0 9 1 * mon`), where APScheduler would need both (an OrTrigger of the two).
"""

from __future__ import annotations

import enum
import itertools
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

EXPECTED = (
    "expected a 5-field cron expression (minute hour day month weekday, UTC) such as "
    "'*/15 * * * *', an interval such as 'every 30s', 'every 5m' or 'every 1h', or 'off'"
)
CRON_EXPECTED = (
    "expected 5 cron fields, minute hour day-of-month month day-of-week (UTC), "
    "such as '0 9 * * 1-5'"
)
MIN_INTERVAL_S = 1
MAX_INTERVAL_S = 7 * 86_400
_MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
}
_INTERVAL = re.compile(r"every\s+(\d+)\s*([a-z]+)")
_FIELD_NAMES = ("minute", "hour", "day", "month", "day_of_week")
#: cron's weekday numbers (0 and 7: Sunday) -> APScheduler's day names.
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_DOW_ITEM = re.compile(r"(\*|[0-7]|[a-z]{3})(?:-([0-7]|[a-z]{3}))?(?:/(\d+))?")
#: Fire times sampled for a cron schedule's longest gap, and how far ahead at most.
_SAMPLE_FIRES = 100
_SAMPLE_SPAN = timedelta(days=400)


class Kind(enum.StrEnum):
    CRON = "cron"
    INTERVAL = "interval"
    OFF = "off"


@dataclass(frozen=True, slots=True)
class Schedule:
    """`cron`: the five fields as written (cron meaning); `every_s`: the interval."""

    kind: Kind
    cron: tuple[str, ...] = ()
    every_s: int = 0

    @property
    def off(self) -> bool:
        return self.kind is Kind.OFF

    def describe(self) -> str:
        """For people and logs: `every 30s`, `cron */15 * * * * (UTC)`, `off`."""
        if self.kind is Kind.INTERVAL:
            return f"every {_duration(self.every_s)}"
        if self.kind is Kind.CRON:
            return f"cron {' '.join(self.cron)} (UTC)"
        return "off"

    def interval_seconds(self, now: datetime | None = None) -> float | None:
        """How long apart runs are (None when off); for cron, the longest gap over the coming
        runs (`0 9 * * 1-5`: the weekend), so scans are not called overdue on a quiet weekend."""
        if self.kind is Kind.INTERVAL:
            return float(self.every_s)
        if self.kind is Kind.CRON:
            start = (now or datetime.now(UTC)).replace(second=0, microsecond=0)
            return _longest_gap(self.cron, start)
        return None


def parse_schedule(text: str) -> Schedule:
    """`*/15 * * * *`, `every 5m`, `off` -> a Schedule; a ValueError saying what was expected."""
    words = " ".join(text.split()).lower()
    if not words:
        raise ValueError(f"{EXPECTED}; found an empty value")
    if words == "off":
        return Schedule(Kind.OFF)
    if words.startswith("every"):
        return _interval(words)
    if words.startswith("@"):
        if words not in _MACROS:
            raise ValueError(
                f"unknown cron shorthand {words[:20]!r}: expected one of "
                f"{', '.join(_MACROS)}, or the 5 cron fields"
            )
        words = _MACROS[words]
    fields = tuple(words.split(" "))
    if len(fields) != 5:
        raise ValueError(f"{EXPECTED}; found {len(fields)} field{'s' * (len(fields) != 1)}")
    schedule = Schedule(Kind.CRON, cron=fields)
    trigger = make_trigger(schedule)  # APScheduler validates the fields (and our weekday)
    if trigger.get_next_fire_time(None, datetime.now(UTC)) is None:
        raise ValueError(f"cron expression {words!r} never fires (no such date); {CRON_EXPECTED}")
    return schedule


#: `every N` fires at multiples of N seconds since this instant, so every replica ticks at the
#: same instants and a lease that moves between two ticks still means one scan per tick.
ALIGNED_FROM = datetime(2000, 1, 1, tzinfo=UTC)


def make_trigger(schedule: Schedule) -> Any:
    """A CronTrigger in UTC (an OrTrigger when cron would OR the day fields), or an
    IntervalTrigger aligned on `ALIGNED_FROM`. ValueError for `off` and a field refused."""
    from apscheduler.triggers.combining import OrTrigger  # type: ignore[import-untyped]
    from apscheduler.triggers.cron import CronTrigger  # type: ignore[import-untyped]
    from apscheduler.triggers.interval import IntervalTrigger  # type: ignore[import-untyped]

    if schedule.kind is Kind.INTERVAL:
        return IntervalTrigger(seconds=schedule.every_s, start_date=ALIGNED_FROM, timezone=UTC)
    if schedule.kind is Kind.OFF:
        raise ValueError("schedule is off: there is no trigger")
    minute, hour, day, month, dow_text = schedule.cron
    dow = day_of_week(dow_text)
    try:
        if day.startswith("*") or dow_text.startswith("*"):
            return CronTrigger(
                minute=minute, hour=hour, day=day, month=month, day_of_week=dow, timezone=UTC
            )
        return OrTrigger(
            [
                CronTrigger(minute=minute, hour=hour, day=day, month=month, timezone=UTC),
                CronTrigger(minute=minute, hour=hour, month=month, day_of_week=dow, timezone=UTC),
            ]
        )
    except ValueError as exc:
        raise ValueError(f"{_field_problem(schedule.cron, exc)}; {CRON_EXPECTED}") from None


def day_of_week(field: str) -> str:
    """Cron's day-of-week field (0 and 7 Sunday) as APScheduler day names, `*` for every day."""
    days: set[int] = set()
    for item in field.split(","):
        m = _DOW_ITEM.fullmatch(item)
        if m is None:
            raise ValueError(
                f"cron day-of-week item {item[:20]!r}: expected 0-7 (0 and 7 are "
                f"Sunday) or sun-sat, with ranges (1-5), lists (1,3) and steps "
                f"(*/2)"
            )
        first, last, step = m.group(1), m.group(2), m.group(3)
        if first == "*":
            if last is not None:
                raise ValueError(
                    f"cron day-of-week item {item!r}: '*' takes no range, "
                    f"expected '*' or '*/<step>'"
                )
            lo, hi = 0, 6
        else:
            lo = _day_number(first)
            hi = _day_number(last) if last is not None else (7 if step else lo)
            if last is not None and hi == 0 and last != "0":
                hi = 7  # `fri-sun`: Sunday at the end of the range
            if hi < lo:
                raise ValueError(
                    f"cron day-of-week range {item!r} runs backwards: expected "
                    f"the earlier day first, such as 1-5 or mon-fri"
                )
        by = int(step) if step else 1
        if by < 1:
            raise ValueError(
                f"cron day-of-week step in {item!r} must be at least 1: expected "
                f"a step such as */2 or 1-5/2"
            )
        days.update(d % 7 for d in range(lo, hi + 1, by))
    if len(days) == 7:
        return "*"
    return ",".join(_DAYS[d] for d in (1, 2, 3, 4, 5, 6, 0) if d in days)


def _day_number(word: str) -> int:
    if word.isdigit():
        return int(word)
    if word not in _DAYS:
        raise ValueError(f"cron day-of-week {word!r}: expected sun, mon, tue, wed, thu, fri or sat")
    return _DAYS.index(word)


def _interval(words: str) -> Schedule:
    m = _INTERVAL.fullmatch(words)
    if m is None or m.group(2) not in _UNITS:
        raise ValueError(
            f"interval {words[:40]!r}: expected 'every <n>s', 'every <n>m' or "
            f"'every <n>h', such as 'every 30s'"
        )
    seconds = int(m.group(1)) * _UNITS[m.group(2)]
    if not MIN_INTERVAL_S <= seconds <= MAX_INTERVAL_S:
        raise ValueError(f"interval {words[:40]!r}: expected between 1 second and 7 days")
    return Schedule(Kind.INTERVAL, every_s=seconds)


def _field_problem(fields: tuple[str, ...], exc: ValueError) -> str:
    """APScheduler's complaint with the cron field it was about."""
    text = str(exc)
    for name, value in zip(_FIELD_NAMES, fields, strict=True):
        if f'"{name}"' in text or f"'{value}'" in text or f'"{value}"' in text:
            label = name.replace("_", "-")
            return f"cron {label} field {value[:20]!r}: {text}"
    return f"cron expression {' '.join(fields)!r}: {text}"


@lru_cache(maxsize=32)
def _longest_gap(fields: tuple[str, ...], start: datetime) -> float:
    trigger = make_trigger(Schedule(Kind.CRON, cron=fields))
    fires: list[datetime] = []
    previous: datetime | None = None
    at = start
    while len(fires) < _SAMPLE_FIRES:
        nxt = trigger.get_next_fire_time(previous, at)
        if nxt is None or (len(fires) >= 2 and nxt - fires[0] > _SAMPLE_SPAN):
            break
        fires.append(nxt)
        previous, at = nxt, nxt + timedelta(seconds=1)
    if len(fires) < 2:
        # Rarer than once in the sample span (`0 0 29 2 *`): the span itself, at least.
        return _SAMPLE_SPAN.total_seconds()
    return max((b - a).total_seconds() for a, b in itertools.pairwise(fires))


def _duration(seconds: int) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
