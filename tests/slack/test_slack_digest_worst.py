"""The digest and the Home tab list the worst findings first ("Worst now"), by impact, each with
its impact in words; from a real scan's record, from hostile records (within Slack's limits and
inert), and from a record of before the worst were kept (no section at all)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import redis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.cases.opening import scan_and_propose
from bot.core.impact import scored
from bot.core.model import Finding, Layout, Reason
from bot.core.rules import Policy
from bot.scan.result import ScanOptions
from bot.slack.blocks.digest import digest_message
from bot.slack.blocks.home import home_view
from bot.store import scans
from tests.block_kit import check_message, check_view
from tests.cases.test_reclaim import DRY
from tests.slack.test_slack_digest import (
    ENDPOINT,
    HOSTILE,
    NOW,
    all_text,
    assert_inert,
    finding,
    health,
    summary,
    texts,
)

TITLE = "*Worst now*"


def flagged(
    key: bytes, *, layout: Layout = Layout.REDIS_PY, held: float = 600.0, **kw: Any
) -> Finding:
    f = finding(key, Reason.STALE_LEASE, layout=layout, held=held, ttl_ms=-1)
    return replace(f, impact=scored(f.reason, f.held_seconds, **kw))


def record(worst: list[Finding] | None, flagged_count: int | None = None) -> dict[str, Any]:
    """A last-scan record as lockguard writes it: the summary, and `worst` unless None."""
    last = summary(flagged=len(worst or []) if flagged_count is None else flagged_count)
    if worst is not None:
        last["worst"] = [scans.worst_entry(f) for f in worst]
    return last


def digest(last: dict[str, Any]) -> dict[str, Any]:
    msg = digest_message(last, [], health(), endpoint=ENDPOINT, now_ms=NOW, since_ms=None)
    check_message(msg)
    assert_inert(msg)
    return msg


def home(last: dict[str, Any]) -> dict[str, Any]:
    view = home_view(last, [], health(), endpoint=ENDPOINT, now_ms=NOW)
    check_view(view)
    assert_inert(view)
    return view


def worst_lines(node: dict[str, Any]) -> list[str]:
    """The "Worst now" section's lines, in the order shown."""
    blocks = list(texts(node))
    at = next(i for i, t in enumerate(blocks) if t.startswith(TITLE))
    out = []
    for text in blocks[at + 1 :]:
        if not text[:1].isdigit():
            break
        out += [line for line in text.split("\n") if line[:1].isdigit()]
    return out


EMAILS = flagged(
    b"bull:emails:42:lock",
    layout=Layout.BULLMQ,
    waiters=5,
    backlog=12,
    owner_alive=False,
    owner_evidence="no worker connected to queue `emails`",
)
CALM = flagged(b"lock:calm", held=9_000.0)


def test_the_worst_are_listed_first_in_score_order_with_their_impact_in_words() -> None:
    for view in (digest(record([CALM, EMAILS])), home(record([CALM, EMAILS]))):
        text = all_text(view)
        assert text.index(TITLE) < text.index("*Oldest locks*")
        first, second = worst_lines(view)
        assert first.startswith("1. `bull:emails:42:lock` · held *10m00s*")
        assert second.startswith("2. `lock:calm`")
        assert (
            "*5 waiting · 12 queued · owner gone: no worker connected to queue `emails` · "
            "lockguard wakes no one: workers retry on their own schedule*"
        ) in text


def test_a_redisson_lock_says_what_its_release_wakes() -> None:
    lock = flagged(b"lock:settle", layout=Layout.REDISSON, waiters=5, woken=3)
    text = all_text(digest(record([lock])))
    assert "*5 waiting · releasing wakes 3 waiters; 2 more retry on their own schedule*" in text


def test_more_flagged_than_kept_says_how_many_more() -> None:
    text = all_text(home(record([CALM], flagged_count=40)))
    assert "…and 39 more flagged locks: `/lockguard scan`" in text


def test_a_record_from_before_the_worst_were_kept_shows_no_worst_section() -> None:
    for view in (digest(record(None, 3)), home(record(None, 3))):
        assert "Worst now" not in all_text(view)
        assert "*Oldest locks*" in all_text(view)


def test_a_scan_that_flagged_nothing_says_so() -> None:
    for view in (digest(record([], 0)), home(record([], 0))):
        assert "*Worst now*: nothing was flagged at the last scan." in all_text(view)


def test_hostile_keys_stay_inert_and_within_limits() -> None:
    worst = [flagged(k, waiters=10**12, owner_evidence="<!channel> `x`") for k in HOSTILE]
    last = record([replace(f, owner="<!here> *boss*") for f in worst])
    for view in (digest(last), home(last)):
        text = all_text(view)
        assert "`lock:&lt;!channel&gt;`" in text
        assert "`\\x00\\xff&lt;@U1&gt;`" in text
        assert "…(+" in text  # the 10 kB key is cut, with a note of how much


_junk = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40)
_impacts = (
    st.none()
    | _junk
    | st.fixed_dictionaries(
        {},
        optional=dict.fromkeys(
            ("waiters", "woken", "backlog", "owner_alive", "owner_evidence", "score"), _junk
        ),
    )
)
_entries = _junk | st.fixed_dictionaries(
    {},
    optional={
        "key": _junk,
        "layout": _junk | st.sampled_from([x.value for x in Layout]),
        "reason": _junk,
        "owner": _junk,
        "held_seconds": _junk,
        "ttl_ms": _junk,
        "impact": _impacts,
    },
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worst=_junk | st.lists(_entries, max_size=30))
@example(worst=[{"impact": {"waiters": "5", "owner_alive": "yes", "score": "nan"}}, 7, None])
def test_any_recorded_worst_renders_within_limits(worst: Any) -> None:
    last = {**summary(), "worst": worst}
    digest(last)
    home(last)


def test_a_real_scans_record_gives_worst_first_with_the_impact(r: redis.Redis) -> None:
    r.hset(b"lock:settle", b"6f1c2c1e-6f3a-4a5b-9c1d-2b3c4d5e6f70:87", b"1")
    r.set(b"lock:old", b"tok")
    # two queued threads, no deadlines: the head is live, and the release wakes it
    r.rpush(b"redisson_lock_queue:{lock:settle}", b"a:1", b"b:2")
    options = ScanOptions([b"lock:*"], Policy(stale_threshold_ms=1_000))
    scan_and_propose(r, options, DRY, propose=False)
    last = scans.last_scan(r)
    assert last is not None
    for view in (digest(last), home(last)):
        first, second = worst_lines(view)
        assert first.startswith("1. `lock:settle` · held ")
        assert second.startswith("2. `lock:old` · held ")
        assert "*2 waiting · releasing wakes 1 waiter; 1 more" in all_text(view)
