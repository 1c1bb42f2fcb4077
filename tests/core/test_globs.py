"""Redis globs on bytes: `matches` agrees with a real redis-server's SCAN MATCH, and `narrows`
never says yes for a pattern that can match a key outside the outer one."""

from __future__ import annotations

import itertools

import pytest
import redis

from bot.core.globs import matches, narrowing, narrows

KEYS = [
    b"lock:a",
    b"lock:ab",
    b"lock:billing:1",
    b"lock:billing:",
    b"lock:",
    b"lock",
    b"lock:x:1",
    b"lock:\x00:1",
    b"lock:*",
    b"lock:?",
    b"lock:[",
    b"lock:\\",
    b"lock:]",
    b"session:abc",
    b"apikey:prod",
    b"bull:emails:7:lock",
    b"bull:emails:lock",
    b"\x17\x00\x01",
    b"lockX",
    b"lock:B",
    b"lock:-",
    b"Lock:a",
]
PATTERNS = [
    b"lock:*",
    b"lock:?",
    b"lock:a*",
    b"lock:[ab]*",
    b"lock:[^a]*",
    b"lock:[a-c]",
    b"lock:\\*",
    b"lock:\\?",
    b"lock:\\[",
    b"lock:\\\\",
    b"*",
    b"lock*",
    b"lock:*:1",
    b"bull:*:lock",
    b"bull:*:*:lock",
    b"\x17*",
    b"lock:[A-Z]",
    b"lock:[]]",
    b"lock:[",
    b"lock:[-]",
    b"session:*",
    b"lock:billing:*",
    b"*:lock",
    b"lock:**",
]


def test_matches_agrees_with_redis_scan_match(real_redis: redis.Redis) -> None:
    for k in KEYS:
        real_redis.set(k, b"1")
    for pattern in PATTERNS:
        found = set(real_redis.scan_iter(match=pattern, count=1000))
        ours = {k for k in KEYS if matches(pattern, k)}
        assert ours == found, pattern


@pytest.mark.parametrize(
    ("inner", "outer", "expected"),
    [
        (b"lock:*", b"lock:*", True),
        (b"lock:billing:*", b"lock:*", True),
        (b"lock:billing:?", b"lock:*", True),
        (b"lock:[ab]*", b"lock:*", True),
        (b"lock:a", b"lock:?", True),
        (b"lock:[ab]", b"lock:?", True),
        (b"lock:[ab]", b"lock:[ab]", True),
        (b"lock:a", b"lock:[ab]", True),
        (b"bull:emails:*:lock", b"bull:*:lock", True),
        (b"lock:**", b"lock:*", True),
        (b"lock:\\*", b"lock:*", True),
        # the holes: anything that could reach a key the configured patterns do not cover
        (b"session:*", b"lock:*", False),
        (b"*", b"lock:*", False),
        (b"lock*", b"lock:*", False),  # `lockX` is not under lock:*
        (b"?ock:*", b"lock:*", False),
        (b"[lm]ock:*", b"lock:*", False),
        (b"lock:*", b"lock:?", False),
        (b"lock:?", b"lock:a", False),
        (b"lock:[abc]", b"lock:[ab]", False),
        (b"lock:c", b"lock:[ab]", False),
        (b"bull:*", b"bull:*:lock", False),
        (b"lock:\\*", b"lock:\\?", False),
    ],
)
def test_narrows(inner: bytes, outer: bytes, expected: bool) -> None:
    assert narrows(inner, outer) is expected


def test_narrows_is_sound_over_every_key_of_the_table() -> None:
    """Whenever `narrows` says yes, no key of the table matches the inner pattern but not the
    outer one (the property the slash scan relies on)."""
    for inner, outer in itertools.product(PATTERNS, PATTERNS):
        if narrows(inner, outer):
            escaped = [k for k in KEYS if matches(inner, k) and not matches(outer, k)]
            assert escaped == [], (inner, outer)


def test_narrowing_names_the_outer_pattern() -> None:
    assert narrowing(b"bull:q:*:lock", [b"lock:*", b"bull:*:lock"]) == b"bull:*:lock"
    assert narrowing(b"session:*", [b"lock:*", b"bull:*:lock"]) is None
