"""bot.ops.watches: LOCKGUARD_WATCHES parsed (pure), a key's value read as a time, and the watches
read from Redis on both backends."""

from __future__ import annotations

import pytest
import redis

from bot.core.errors import ConfigError
from bot.ops.watches import (
    MISSING,
    STALE,
    UNREADABLE,
    WRONG_TYPE,
    Watch,
    check_watches,
    evaluate,
    parse_watches,
    read_watches,
    value_time_ms,
)
from bot.store import scans

T = 1_767_225_600_000  # 2026-01-01T00:00:00Z in ms


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ()),
        ("  ", ()),
        ("jobs:etl=3600", (Watch(b"jobs:etl", 3600),)),
        (" a = 1 , b=2 ", (Watch(b"a", 1), Watch(b"b", 2))),
        ("k=v=60", (Watch(b"k=v", 60),)),  # the last '=' separates the age
        ("bin\\x00\\xffkey=5", (Watch(b"bin\x00\xffkey", 5),)),
        ("caf\u00e9=10", (Watch("caf\u00e9".encode(), 10),)),
        ("{lockguard}:heartbeat=1800", (Watch(b"{lockguard}:heartbeat", 1800),)),
    ],
)
def test_parse(text: str, expected: tuple[Watch, ...]) -> None:
    assert parse_watches(text) == expected
    assert check_watches(text) == text


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("a=1,", "entry 2 is empty"),
        ("jobs:etl", "is not KEY=MAX_AGE_SECONDS"),
        ("=60", "is not KEY=MAX_AGE_SECONDS"),
        ("a=0", "at least 1"),
        ("a=-5", "whole number of seconds"),
        ("a=1.5", "whole number of seconds"),
        ("a=1h", "whole number of seconds"),
        ("a=", "whole number of seconds"),
        ("a=1,a=2", "watched twice"),
    ],
)
def test_bad_input_names_the_variable_and_the_entry(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=r"^LOCKGUARD_WATCHES: ") as info:
        parse_watches(text)
    assert says in str(info.value)
    assert info.value.exit_code == 2
    with pytest.raises(ValueError, match=says) as plain:  # for a settings validator
        check_watches(text)
    assert "LOCKGUARD_WATCHES" not in str(plain.value)


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        (b"1767225600", T),
        (b" 1767225600\n", T),
        (b"1767225600.25", T + 250),
        (b"1767225600000", T),
        (b"1767225600123", T + 123),
        (b"99999999999", 99_999_999_999_000),  # below 10^11: seconds
        (b"100000000000", 100_000_000_000),  # from 10^11: ms
        (b"2026-01-01T00:00:00Z", T),
        (b"2026-01-01T01:00:00+01:00", T),
        (b"2026-01-01T00:00:00.500000+00:00", T + 500),
        (b"2026-01-01 00:00:00", T),  # no offset: UTC
        (b"2026-01-01", T),
        (b"", None),
        (b"yesterday", None),
        (b"-5", None),
        (b"1e9", None),
        (b"\xff\xfe", None),
        (b"nan", None),
    ],
)
def test_value_time(value: bytes, ms: int | None) -> None:
    assert value_time_ms(value) == ms


W = Watch(b"jobs:etl", 60)


@pytest.mark.parametrize(
    ("value", "now", "problem", "age"),
    [
        (b"1767225600", T + 60_000, "", 60.0),  # exactly the allowed age: still fresh
        (b"1767225600", T + 60_001, STALE, 60.001),
        (b"1767225600000", T + 5_000, "", 5.0),
        (b"1767225600", T - 5_000, "", 0.0),  # ahead of the server's clock: age 0
        (None, T, MISSING, None),
        (b"soon", T, UNREADABLE, None),
    ],
)
def test_evaluate(value: bytes | None, now: int, problem: str, age: float | None) -> None:
    state = evaluate(W, value, now)
    assert state.problem == problem
    assert state.overdue is bool(problem)
    assert state.age_seconds == age
    assert state.to_json()["ok"] is not bool(problem)
    assert "jobs:etl" in state.describe()
    assert "allowed 1m00s" in state.describe()


def test_read_watches_on_redis(r: redis.Redis) -> None:
    now_s = scans.server_ms(r) // 1000
    r.set(b"fresh", str(now_s).encode())
    r.set(b"fresh:ms", str(now_s * 1000).encode())
    r.set(b"stale", str(now_s - 120).encode())
    r.set(b"iso", b"2001-01-01T00:00:00Z")
    r.hset(b"hash", b"f", b"1")
    r.set(b"bin\x00\xff", str(now_s).encode())
    r.set(b"junk", b"\x00\x01")
    watches = parse_watches(
        "fresh=60,fresh:ms=60,stale=60,iso=60,hash=60,gone=60,bin\\x00\\xff=60,junk=60"
    )
    got = {s.watch.key: s.problem for s in read_watches(r, watches)}
    assert got == {
        b"fresh": "",
        b"fresh:ms": "",
        b"stale": STALE,
        b"iso": STALE,
        b"hash": WRONG_TYPE,
        b"gone": MISSING,
        b"bin\x00\xff": "",
        b"junk": UNREADABLE,
    }
    assert read_watches(r, ()) == []


def test_read_watches_raises_on_a_down_redis(closed_port: int) -> None:
    client = redis.Redis(port=closed_port, socket_connect_timeout=1, retry=None)
    with pytest.raises(redis.ConnectionError):
        read_watches(client, (W,))
