"""Silence watches for the user's own jobs (`LOCKGUARD_WATCHES=jobs:nightly:last_ok=90000,...`):
keys a healthy pipeline updates every run with the time it ran, each with the age in seconds it
may reach (docs/always-on.md). The last `=` of an entry separates the age, so a key may hold `=`;
`\\xHH` names a byte. The value, read with `GET`, is a Unix time (below `MS_FROM`: seconds, else
milliseconds) or an ISO 8601 time (UTC without an offset); a missing key, a key that is not a
string, or a value that is no time is overdue. Ages use the Redis server's clock (`TIME`); a time
ahead of it is age 0.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime

import redis

from bot.core.clock import iso_utc
from bot.core.display import duration, escape
from bot.core.errors import ConfigError
from bot.store import scans, slots
from bot.store.patterns import escaped_bytes

ENV = "LOCKGUARD_WATCHES"
#: Numbers from here up are milliseconds, below it seconds.
MS_FROM = 10**11
_NUMBER = re.compile(rb"\d{1,20}(?:\.\d{1,9})?")
_AGE = re.compile(r"\d{1,10}")

# `WatchState.problem`: "" when the key is fresh.
MISSING, STALE, UNREADABLE, WRONG_TYPE = "missing", "stale", "unreadable", "wrong type"


@dataclass(frozen=True, slots=True)
class Watch:
    key: bytes
    max_age_seconds: int

    @property
    def name(self) -> str:
        """Escaped and cut, for people."""
        return escape(self.key, 120)


@dataclass(frozen=True, slots=True)
class WatchState:
    """One watch as read at `now_ms` (server time)."""

    watch: Watch
    now_ms: int
    problem: str = ""
    updated_ms: int | None = None  # the time the key holds, when it holds one

    @property
    def overdue(self) -> bool:
        return bool(self.problem)

    @property
    def age_seconds(self) -> float | None:
        if self.updated_ms is None:
            return None
        return max(self.now_ms - self.updated_ms, 0) / 1000

    def describe(self) -> str:
        """`jobs:nightly updated 2h ago at ... (allowed 1h)`."""
        allowed = f"allowed {duration(self.watch.max_age_seconds)}"
        if self.problem == MISSING:
            return f"{self.watch.name} is missing ({allowed})"
        if self.problem == WRONG_TYPE:
            return f"{self.watch.name} is not a string key, so it holds no time ({allowed})"
        if self.problem == UNREADABLE:
            return f"{self.watch.name} holds no Unix time (s or ms) nor ISO 8601 time ({allowed})"
        age = self.age_seconds or 0.0
        when = iso_utc(self.updated_ms) if self.updated_ms is not None else "?"
        return f"{self.watch.name} updated {duration(age)} ago at {when} ({allowed})"

    def to_json(self) -> dict[str, object]:
        age = self.age_seconds
        return {
            "key": self.watch.name,
            "key_hex": self.watch.key.hex(),
            "max_age_seconds": self.watch.max_age_seconds,
            "age_seconds": None if age is None else round(age, 3),
            "updated": iso_utc(self.updated_ms) if self.updated_ms is not None else None,
            "ok": not self.overdue,
            "problem": self.problem or None,
        }


# -- parsing (pure) ----------------------------------------------------------------------------


def check_watches(text: str) -> str:
    """For a settings validator: `text`, or a ValueError without the variable's name (the
    settings' message puts it first)."""
    _parse(text)
    return text


def parse_watches(text: str | None) -> tuple[Watch, ...]:
    """A ConfigError names the variable."""
    try:
        return _parse(text or "")
    except ValueError as exc:
        raise ConfigError(f"{ENV}: {exc}") from None


def _parse(text: str) -> tuple[Watch, ...]:
    out: dict[bytes, Watch] = {}
    if not text.strip():
        return ()
    for n, raw in enumerate(text.split(","), start=1):
        item = raw.strip()
        if not item:
            raise ValueError(
                f"entry {n} is empty; expected comma-separated "
                "KEY=MAX_AGE_SECONDS entries such as 'jobs:etl:last_ok=3600'"
            )
        key_text, sep, age_text = item.rpartition("=")
        key_text, age_text = key_text.strip(), age_text.strip()
        if not sep or not key_text:
            raise ValueError(
                f"entry {n} ({item[:60]!r}) is not KEY=MAX_AGE_SECONDS, "
                "e.g. 'jobs:etl:last_ok=3600'"
            )
        if not _AGE.fullmatch(age_text) or int(age_text) < 1:
            raise ValueError(
                f"entry {n} ({item[:60]!r}): the allowed age must be a whole number "
                f"of seconds, at least 1, found {age_text[:20]!r}"
            )
        key = escaped_bytes(key_text)
        if key in out:
            raise ValueError(f"entry {n}: the key {escape(key, 60)} is watched twice")
        out[key] = Watch(key, int(age_text))
    return tuple(out.values())


# -- evaluation (pure) -------------------------------------------------------------------------


def value_time_ms(value: bytes) -> int | None:
    """In ms since the epoch; None when the value holds no time."""
    text = value.strip()
    if _NUMBER.fullmatch(text):
        number = float(text)
        ms = number * 1000 if number < MS_FROM else number
        return int(ms) if math.isfinite(ms) else None
    try:
        when = datetime.fromisoformat(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def evaluate(
    watch: Watch, value: bytes | None, now_ms: int, *, wrong_type: bool = False
) -> WatchState:
    """`value` None: the key is missing."""
    if wrong_type:
        return WatchState(watch, now_ms, WRONG_TYPE)
    if value is None:
        return WatchState(watch, now_ms, MISSING)
    updated = value_time_ms(value)
    if updated is None:
        return WatchState(watch, now_ms, UNREADABLE)
    stale = now_ms - updated > watch.max_age_seconds * 1000
    return WatchState(watch, now_ms, STALE if stale else "", updated)


# -- reading -----------------------------------------------------------------------------------


def read_watches(client: redis.Redis, watches: tuple[Watch, ...]) -> list[WatchState]:
    """One non-transactional pipeline: `TIME` and a `GET` each. A key that is not a string is
    WRONG_TYPE; any other Redis failure raises."""
    if not watches:
        return []
    cluster = slots.is_cluster(client)  # TIME cannot be pipelined on a Redis Cluster
    with client.pipeline(transaction=False) as pipe:
        if not cluster:
            pipe.time()
        for w in watches:
            pipe.get(w.key)
        replies = pipe.execute(raise_on_error=False)
    if cluster:
        replies.insert(0, client.time())
    if isinstance(replies[0], Exception):
        raise replies[0]
    now = scans.time_ms(replies[0])
    out = []
    for w, reply in zip(watches, replies[1:], strict=True):
        # redis-py may put "Command # n (GET ...) of pipeline caused error: " first.
        if isinstance(reply, redis.ResponseError) and "WRONGTYPE Operation" in str(reply):
            out.append(evaluate(w, None, now, wrong_type=True))
        elif isinstance(reply, Exception):
            raise reply
        else:
            out.append(evaluate(w, reply if isinstance(reply, bytes) else None, now))
    return out
