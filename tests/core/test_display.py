"""Bytes shown to people (pure): escaped, truncated, round-trippable to the exact bytes."""

from __future__ import annotations

import random

import pytest

from bot.core.display import duration, escape, to_hex, ttl, unescape

# (id, bytes, shown)
ESCAPE_CASES = [
    ("plain ascii", b"lock:report-42", "lock:report-42"),
    (
        "Stalwart binary key",
        b"\x17\x00\x00\x00\x00\x00\x00\x00\x07",
        "\\x17\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x07",
    ),
    ("not UTF-8", b"lock:\xff\xfe", "lock:\\xff\\xfe"),
    ("backslash is escaped so text is unambiguous", b"a\\x41", "a\\x5cx41"),
    ("unicode shown as is", "lock:café-ü-日本".encode(), "lock:café-ü-日本"),
    ("unicode with a control char", "é\n".encode(), "é\\x0a"),
    ("newline and tab", b"a\nb\tc", "a\\x0ab\\x09c"),
    ("DEL byte", b"a\x7f", "a\\x7f"),
    ("non-printable unicode (zero width space)", "a\u200bb".encode(), "a\\xe2\\x80\\x8bb"),
    ("Slack broadcast markup stays literal text", b"<!channel>", "<!channel>"),
    (
        "Slack mention/link markup stays literal text",
        b"<@U123|x> *bold* `code` <http://x|y>",
        "<@U123|x> *bold* `code` <http://x|y>",
    ),
    ("empty", b"", ""),
]


@pytest.mark.parametrize(
    ("data", "shown"), [pytest.param(c[1], c[2], id=c[0]) for c in ESCAPE_CASES]
)
def test_escape(data: bytes, shown: str) -> None:
    assert escape(data) == shown
    assert unescape(escape(data, None)) == data


@pytest.mark.parametrize(
    ("data", "limit", "shown"),
    [
        (b"a" * 10, 10, "a" * 10),
        (b"a" * 11, 10, "a" * 10 + "…(+1 chars)"),
        (b"a" * 1000, 5, "aaaaa…(+995 chars)"),
        (b"\x00" * 10, 8, "\\x00\\x00…(+32 chars)"),
        (b"x" * 500, None, "x" * 500),
    ],
)
def test_truncation(data: bytes, limit: int | None, shown: str) -> None:
    assert escape(data, limit) == shown


def test_default_limit_cuts_huge_values() -> None:
    shown = escape(b"v" * 1_000_000)
    assert len(shown) < 200
    assert shown.endswith("…(+999880 chars)")


@pytest.mark.parametrize("seed", range(200))
def test_round_trip_random_bytes(seed: int) -> None:
    rng = random.Random(seed)
    data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
    assert unescape(escape(data, None)) == data


@pytest.mark.parametrize("seed", range(100))
def test_round_trip_random_unicode(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = ["a", "\\", "x", "4", "1", "é", "日", "\u200b", "\n", "\x00", "😀", "<", "!", " "]
    data = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40))).encode()
    assert unescape(escape(data, None)) == data


@pytest.mark.parametrize(
    ("text", "data"),
    [
        ("\\x17*", b"\x17*"),
        ("\\X", b"\\X"),
        ("\\x4", b"\\x4"),
        ("\\xZZ", b"\\xZZ"),
        ("é", "é".encode()),
    ],
)
def test_unescape_reads_typed_text(text: str, data: bytes) -> None:
    assert unescape(text) == data


def test_to_hex() -> None:
    assert to_hex(b"\x17\x00\xff") == "1700ff"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0s"),
        (45, "45s"),
        (59.9, "59s"),
        (60, "1m00s"),
        (725, "12m05s"),
        (3600, "1h00m"),
        (11_220, "3h07m"),
        (86_400, "1d00h"),
        (352_800, "4d02h"),
        (-5, "-5s"),
    ],
)
def test_duration(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown


@pytest.mark.parametrize(
    ("ttl_ms", "shown"), [(-1, "none"), (-2, "gone"), (0, "0s"), (90_000, "1m30s")]
)
def test_ttl(ttl_ms: int, shown: str) -> None:
    assert ttl(ttl_ms) == shown
