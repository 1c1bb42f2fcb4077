"""The impact score orders findings as the on-call engineer would: a lock someone waits behind (or
that holds back queued work) first, then one whose owner is provably gone, then the verdict's
severity and the age; and the words the messages say."""

from __future__ import annotations

import pytest

from bot.core.impact import impact_json, impact_words, score, scored
from bot.core.model import Impact, Layout, Reason

DAY = 86_400.0


def test_waiters_or_backlog_rank_above_none_whatever_the_verdict_and_age() -> None:
    quiet = score(Reason.KEPT_ALIVE_BY_CONTENDERS, 300 * 365 * DAY, owner_alive=False)
    assert score(Reason.LONG_HELD_RENEWING, 1.0, waiters=1) > quiet
    assert score(Reason.LONG_HELD_RENEWING, 1.0, backlog=1) > quiet


def test_a_provably_dead_owner_ranks_above_an_unknown_or_alive_one() -> None:
    unknown = score(Reason.KEPT_ALIVE_BY_CONTENDERS, 30 * DAY)
    alive = score(Reason.KEPT_ALIVE_BY_CONTENDERS, 30 * DAY, owner_alive=True)
    assert score(Reason.LONG_HELD_RENEWING, 1.0, owner_alive=False) > max(unknown, alive)
    assert alive == unknown  # seen alive is no reason to rank a lock lower than unknown


def test_then_the_existing_severity_and_age_order() -> None:
    assert score(Reason.KEPT_ALIVE_BY_CONTENDERS, 1.0) > score(Reason.STALE_LEASE, 9 * DAY)
    assert score(Reason.STALE_LEASE, 1.0) > score(Reason.INFINITE_TTL, 9 * DAY)
    assert score(Reason.INFINITE_TTL, 1.0) > score(Reason.LONG_HELD_RENEWING, 9 * DAY)
    assert score(Reason.STALE_LEASE, 2 * DAY) > score(Reason.STALE_LEASE, DAY)
    # zero waiters or an empty backlog is no evidence of impact: the same rank as unknown
    assert score(Reason.STALE_LEASE, DAY, waiters=0, backlog=0) == score(Reason.STALE_LEASE, DAY)


@pytest.mark.parametrize(
    ("impact", "words"),
    [
        (None, ""),
        (Impact(), ""),
        (Impact(waiters=0, backlog=0), ""),
        (
            Impact(waiters=5, owner_alive=False, owner_evidence="no worker connected to queue `e`"),
            "5 waiting · owner gone: no worker connected to queue `e`",
        ),
        (Impact(backlog=1234), "1,234 queued"),
        (Impact(owner_alive=True, owner_evidence="1 worker"), "owner seen alive: 1 worker"),
    ],
)
def test_words(impact: Impact | None, words: str) -> None:
    assert impact_words(impact) == words


def test_json_shape_and_scored() -> None:
    i = scored(Reason.STALE_LEASE, 10.0, waiters=3, owner_evidence="x")
    assert i.score == score(Reason.STALE_LEASE, 10.0, waiters=3)
    assert impact_json(i) == {
        "waiters": 3,
        "backlog": None,
        "owner_alive": None,
        "owner_evidence": "x",
        "score": round(i.score, 3),
    }
    assert impact_json(None)["waiters"] is None


@pytest.mark.parametrize(
    ("impact", "layout", "words"),
    [
        # Redisson: the release's unlock message reaches the channel's subscribers
        (Impact(waiters=5, woken=5), Layout.REDISSON, "5 waiting · releasing wakes 5 waiters"),
        (Impact(waiters=1, woken=1), Layout.REDISSON_RW, "1 waiting · releasing wakes 1 waiter"),
        # of a fair lock's queue only its live head is woken (FairWake, counted in `woken`);
        # the other queued threads and sharded subscribers retry on their own
        (
            Impact(waiters=5, woken=2),
            Layout.REDISSON,
            "5 waiting · releasing wakes 2 waiters; 3 more retry on their own schedule",
        ),
        (
            Impact(waiters=3, woken=0),
            Layout.REDISSON,
            "3 waiting · releasing wakes no one: 3 waiters retry on their own schedule",
        ),
        (
            Impact(waiters=1, woken=0),
            Layout.REDISSON,
            "1 waiting · releasing wakes no one: 1 waiter retries on its own schedule",
        ),
        # lockguard sends BullMQ no wake-up: its workers come back by themselves
        (
            Impact(backlog=9, owner_alive=False, owner_evidence="no worker connected to queue `e`"),
            Layout.BULLMQ,
            "9 queued · owner gone: no worker connected to queue `e` · "
            "lockguard wakes no one: workers retry on their own schedule",
        ),
        (
            Impact(waiters=2),
            Layout.STRING,
            "2 waiting · lockguard wakes no one: waiters retry on their own schedule",
        ),
        # nobody waits, or Redis cannot tell: nothing said about the release
        (Impact(waiters=0, woken=0), Layout.REDISSON, ""),
        (Impact(), Layout.PYTHON_REDIS_LOCK, ""),
        (Impact(waiters=5, woken=5), None, "5 waiting"),
    ],
)
def test_words_say_what_the_release_does_for_the_waiters(
    impact: Impact, layout: Layout | None, words: str
) -> None:
    assert impact_words(impact, layout) == words
