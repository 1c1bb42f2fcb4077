"""Time as lockguard reads and writes it: the Redis server's `TIME` in ms (never the local
clock: ages are measured on the server's), and UTC text."""

from __future__ import annotations

from datetime import UTC, datetime


def time_ms(seconds: int | bytes | str, micros: int | bytes | str) -> int:
    """A `TIME` reply's two parts (as numbers, or the bytes a script returns) in ms."""
    return int(seconds) * 1000 + int(micros) // 1000


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def iso_utc(ms: int) -> str:
    """For machines: `2026-11-29T12:09:46.437Z` (events, JSON, logs)."""
    return _utc(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def text_utc(ms: int) -> str:
    """For people: `2026-11-29 12:09:46 UTC`."""
    return _utc(ms).strftime("%Y-%m-%d %H:%M:%S UTC")


def clock_utc(ms: int, now_ms: int) -> str:
    """For people, near `now_ms`: `14:32:05 UTC` on the same day, else the date too."""
    text = text_utc(ms)
    return text[11:] if text[:10] == text_utc(now_ms)[:10] else text


def day_utc(ms: int) -> str:
    """`261129`: the day in case ids."""
    return _utc(ms).strftime("%y%m%d")
