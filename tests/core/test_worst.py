"""Keeping the worst N, and lockguard's time text: the shared helpers."""

from __future__ import annotations

import random

import pytest

from bot.core.clock import day_utc, iso_utc, text_utc, time_ms
from bot.core.worst import Worst


@pytest.mark.parametrize("keep", [0, 1, 3, 50])
def test_the_worst_n_are_kept_worst_first_whatever_the_order(keep: int) -> None:
    ranks = [(float(i % 7), float(i)) for i in range(1_000)]
    random.Random(keep).shuffle(ranks)
    worst: Worst[tuple[float, float]] = Worst(keep)
    for rank in ranks:
        worst.add(rank, rank)
    assert worst.items() == sorted(ranks, reverse=True)[:keep]
    assert len(worst) == keep


def test_among_equal_ranks_the_later_is_kept_and_shown_in_order_added() -> None:
    worst: Worst[str] = Worst(2)
    for name in ("a", "b", "c", "d"):
        worst.add((1.0,), name)
    assert worst.items() == ["c", "d"]
    assert worst.admits((1.0,))
    assert not worst.admits((0.5,))


def test_a_negative_keep_is_refused() -> None:
    with pytest.raises(ValueError, match="keep"):
        Worst(-1)


@pytest.mark.parametrize(
    ("ms", "iso", "text", "day"),
    [
        (0, "1970-01-01T00:00:00.000Z", "1970-01-01 00:00:00 UTC", "700101"),
        (1_795_954_186_437, "2026-11-29T12:09:46.437Z", "2026-11-29 12:09:46 UTC", "261129"),
    ],
)
def test_utc_text(ms: int, iso: str, text: str, day: str) -> None:
    assert (iso_utc(ms), text_utc(ms), day_utc(ms)) == (iso, text, day)


@pytest.mark.parametrize(
    ("reply", "ms"),
    [
        ((1_795_954_186, 437_999), 1_795_954_186_437),
        ((b"1795954186", b"000999"), 1_795_954_186_000),
    ],
)
def test_a_time_reply_in_ms(reply: tuple[int | bytes, int | bytes], ms: int) -> None:
    assert time_ms(*reply) == ms
