"""Redis globs on bytes: `matches` agrees with a real redis-server's SCAN MATCH, and `narrows`
never says yes for a pattern that can match a key outside the outer one."""

from __future__ import annotations

import itertools
import random

import pytest
import redis

from bot.core.globs import literal, matches, narrowing, narrows

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
        # Redis reads `a-]` as a range, so `[a-]:lock` is one class running to the end: the
        # pattern matches `app:sessions:u42-token-a` (issue: it was taken as within)
        (b"app:*[a-]:lock", b"app:*:lock", False),
        (b"lock:[a-]x", b"lock:[a-]", False),  # the open class also holds `x`
        (b"lock:[-a]", b"lock:*", True),
        (b"lock:[^a]", b"lock:?", True),
        (b"lock:[z-a]", b"lock:[a-z]", True),  # a reversed range is swapped
        (b"lock:[a", b"lock:?", True),  # an unclosed class runs to the end
        (b"lock:[]a]", b"lock:?a]", True),  # `[]` is an empty class, then `a]`
        (b"**", b"lock:*", False),
        (b"*", b"**", False),  # SCAN MATCH * also returns the empty key; ** does not
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


# -- fuzzed against a real redis-server's SCAN MATCH ---------------------------------------------

FUZZ_BYTES = b"ab]-^\\*?[:\x00\x80\xff"


def _random_pattern(rng: random.Random) -> bytes:
    size = rng.randint(0, 8)
    return bytes(rng.choice(FUZZ_BYTES) for _ in range(size))


def _random_key(rng: random.Random) -> bytes:
    size = rng.randint(0, 5)
    return bytes(rng.choice(b"ab]-^\\*?[:\x00\x7f\x80\xfe\xff") for _ in range(size))


@pytest.fixture
def fuzz_keys(real_redis: redis.Redis) -> list[bytes]:
    rng = random.Random(20261206)
    keys = sorted({_random_key(rng) for _ in range(400)} | {b"", b"app:sessions:u42-token-a"})
    with real_redis.pipeline(transaction=False) as pipe:
        for k in keys:
            pipe.set(k, b"1")
        pipe.execute()
    return keys


def test_matches_agrees_with_scan_match_on_thousands_of_random_pairs(
    real_redis: redis.Redis, fuzz_keys: list[bytes]
) -> None:
    """400 random keys x 300 random patterns made of the bytes glob parsing turns on (`[`,
    `]`, `-`, `^`, `\\`, `*`, `?`, bytes on both sides of 0x80): every pair as Redis says."""
    rng = random.Random(33)
    patterns = [_random_pattern(rng) for _ in range(300)] + [b"app:*[a-]:lock", b"*", b"**"]
    pairs = 0
    for pattern in patterns:
        found = set(real_redis.scan_iter(match=pattern, count=10_000))
        ours = {k for k in fuzz_keys if matches(pattern, k)}
        assert ours == found, pattern
        pairs += len(fuzz_keys)
    assert pairs > 50_000


def test_a_literal_pattern_matches_exactly_its_key_as_redis_says(
    real_redis: redis.Redis, fuzz_keys: list[bytes]
) -> None:
    """`literal(key)` (glob bytes escaped) and `literal(key[:n]) + b"*"` (a key found again by
    its first bytes, `bot.scan.oversized`) against SCAN MATCH: exactly the keys they name."""
    rng = random.Random(34)
    for key in rng.sample([k for k in fuzz_keys if k], 40):
        assert set(real_redis.scan_iter(match=literal(key), count=10_000)) == {key}
        head = key[: rng.randint(1, len(key))]
        found = set(real_redis.scan_iter(match=literal(head) + b"*", count=10_000))
        assert found == {k for k in fuzz_keys if k.startswith(head)}


def test_narrows_is_sound_against_scan_match_on_random_patterns(
    real_redis: redis.Redis, fuzz_keys: list[bytes]
) -> None:
    """Whenever `narrows` says yes for two random patterns, every key Redis returns for the
    inner one Redis also returns for the outer one."""
    rng = random.Random(34)
    patterns = [_random_pattern(rng) for _ in range(150)]
    matched = {p: set(real_redis.scan_iter(match=p, count=10_000)) for p in patterns}
    proven = 0
    for inner, outer in itertools.product(patterns, patterns):
        if narrows(inner, outer):
            assert matched[inner] <= matched[outer], (inner, outer)
            proven += 1
    assert proven > 300  # not only the trivial pairs
