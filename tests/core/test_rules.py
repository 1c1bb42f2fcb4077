"""Verdicts (pure): one lease and the latest reading in, one reason code out."""

from __future__ import annotations

import pytest

from bot.core.model import FINDING_REASONS, RELEASABLE_REASONS, Layout, Reason, Tenure
from bot.core.rules import Policy, classify, is_renewing

NOW = 1_767_225_600_000
THRESHOLD = 60_000
POLICY = Policy(stale_threshold_ms=THRESHOLD)
NO_FLAG = Policy(stale_threshold_ms=THRESHOLD, flag_infinite_ttl=False)


def tenure(
    held_ms: int,
    *,
    observations: int = 2,
    last_rearm_ago: int | None = None,
    max_pttl: int = 30_000,
    counter: tuple[int, int] | None = None,
) -> Tenure:
    return Tenure(
        first_seen_ms=NOW - held_ms,
        last_seen_ms=NOW,
        last_pttl_ms=max_pttl,
        observations=observations,
        rearms=0 if last_rearm_ago is None else 1,
        last_rearm_ms=None if last_rearm_ago is None else NOW - last_rearm_ago,
        max_pttl_ms=max_pttl,
        counter_start=None if counter is None else counter[0],
        counter_last=None if counter is None else counter[1],
        identity_digest=b"\x00" * 16,
    )


S, C = Layout.STRING, Layout.COUNTER
# (id, tenure, pttl now, layout, policy, verdict)
CASES = [
    ("no TTL, just seen", tenure(0, observations=1), -1, S, POLICY, Reason.INFINITE_TTL),
    ("no TTL, old", tenure(10 * THRESHOLD), -1, S, POLICY, Reason.INFINITE_TTL),
    ("no TTL, flag off, young", tenure(THRESHOLD - 1), -1, S, NO_FLAG, Reason.HEALTHY),
    ("no TTL, flag off, old", tenure(THRESHOLD), -1, S, NO_FLAG, Reason.STALE_LEASE),
    (
        "no TTL, flag off, old on first sight (value says so)",
        tenure(THRESHOLD, observations=1),
        -1,
        S,
        NO_FLAG,
        Reason.STALE_LEASE,
    ),
    ("TTL, young", tenure(THRESHOLD - 1), 5_000, S, POLICY, Reason.HEALTHY),
    (
        "TTL, exactly at the threshold, never renewed",
        tenure(THRESHOLD),
        5_000,
        S,
        POLICY,
        Reason.STALE_LEASE,
    ),
    ("TTL, old, never renewed", tenure(5 * THRESHOLD), 5_000, S, POLICY, Reason.STALE_LEASE),
    (
        "TTL, old by its value but seen only once: watch once more",
        tenure(5 * THRESHOLD, observations=1),
        5_000,
        S,
        POLICY,
        Reason.HEALTHY,
    ),
    (
        "TTL, old, renewed just now",
        tenure(5 * THRESHOLD, last_rearm_ago=0),
        30_000,
        S,
        POLICY,
        Reason.LONG_HELD_RENEWING,
    ),
    (
        "renewed within the threshold",
        tenure(5 * THRESHOLD, last_rearm_ago=THRESHOLD),
        30_000,
        S,
        POLICY,
        Reason.LONG_HELD_RENEWING,
    ),
    (
        "last renewal longer ago than threshold and lease length",
        tenure(5 * THRESHOLD, last_rearm_ago=THRESHOLD + 1),
        20_000,
        S,
        POLICY,
        Reason.STALE_LEASE,
    ),
    (
        "1 h lease renewed 50 min ago is still renewing (window = lease length)",
        tenure(3 * 3_600_000, last_rearm_ago=50 * 60_000, max_pttl=3_600_000),
        600_000,
        S,
        POLICY,
        Reason.LONG_HELD_RENEWING,
    ),
    (
        "1 h lease last renewed 61 min ago",
        tenure(3 * 3_600_000, last_rearm_ago=61 * 60_000, max_pttl=3_600_000),
        600_000,
        S,
        POLICY,
        Reason.STALE_LEASE,
    ),
    (
        "counter, young",
        tenure(1000, counter=(1, 9), last_rearm_ago=0),
        300_000,
        C,
        POLICY,
        Reason.HEALTHY,
    ),
    (
        "counter grows and TTL re-armed: kept alive by contenders",
        tenure(THRESHOLD, counter=(1, 9), last_rearm_ago=0),
        300_000,
        C,
        POLICY,
        Reason.KEPT_ALIVE_BY_CONTENDERS,
    ),
    (
        "counter re-armed without growing: renewing owner",
        tenure(THRESHOLD, counter=(1, 1), last_rearm_ago=0),
        300_000,
        C,
        POLICY,
        Reason.LONG_HELD_RENEWING,
    ),
    (
        "counter grew but TTL not re-armed: stale",
        tenure(THRESHOLD, counter=(1, 9)),
        10_000,
        C,
        POLICY,
        Reason.STALE_LEASE,
    ),
    (
        "counter untouched: stale",
        tenure(THRESHOLD, counter=(1, 1)),
        10_000,
        C,
        POLICY,
        Reason.STALE_LEASE,
    ),
    (
        "counter layout without a TTL",
        tenure(THRESHOLD, counter=(1, 9)),
        -1,
        C,
        POLICY,
        Reason.INFINITE_TTL,
    ),
    (
        "a string whose token grew is not a counter",
        tenure(THRESHOLD, counter=(1, 9), last_rearm_ago=0),
        300_000,
        S,
        POLICY,
        Reason.LONG_HELD_RENEWING,
    ),
]


@pytest.mark.parametrize(
    ("the_lease", "pttl", "layout", "policy", "verdict"),
    [pytest.param(*c[1:], id=c[0]) for c in CASES],
)
def test_verdicts(
    the_lease: Tenure, pttl: int, layout: Layout, policy: Policy, verdict: Reason
) -> None:
    assert classify(the_lease, pttl, layout, NOW, policy) is verdict


@pytest.mark.parametrize(
    ("last_rearm_ago", "max_pttl", "renewing"),
    [
        (None, 30_000, False),
        (0, 30_000, True),
        (THRESHOLD, 30_000, True),
        (THRESHOLD + 1, 30_000, False),
        (THRESHOLD + 1, THRESHOLD + 1, True),
        (2 * THRESHOLD, 3 * THRESHOLD, True),
    ],
)
def test_is_renewing_window(last_rearm_ago: int | None, max_pttl: int, renewing: bool) -> None:
    assert (
        is_renewing(
            tenure(THRESHOLD, last_rearm_ago=last_rearm_ago, max_pttl=max_pttl), NOW, POLICY
        )
        is renewing
    )


def test_renewing_locks_are_reported_but_never_routinely_released() -> None:
    assert Reason.LONG_HELD_RENEWING in FINDING_REASONS
    assert Reason.LONG_HELD_RENEWING not in RELEASABLE_REASONS
    assert Reason.HEALTHY not in FINDING_REASONS
    assert {
        Reason.INFINITE_TTL,
        Reason.STALE_LEASE,
        Reason.KEPT_ALIVE_BY_CONTENDERS,
    } <= RELEASABLE_REASONS
