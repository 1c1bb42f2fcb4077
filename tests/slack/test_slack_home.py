"""The Home tab: the lock inventory at a glance, as a person opening it sees it, within limits."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings

from bot.cases.case import Case, State
from bot.slack.blocks.guard import GuardHealth, WatchState
from bot.slack.blocks.home import home_view
from bot.slack.blocks.kit import VIEW_BLOCKS
from tests.block_kit import check_view
from tests.slack.test_slack_digest import (
    CASES,
    DAY,
    ENDPOINT,
    HEALTH,
    HOSTILE,
    HOUR,
    NOW,
    SCANS,
    WORST,
    all_text,
    assert_inert,
    case,
    finding,
    health,
    summary,
    texts,
)


def home(
    last: dict[str, Any] | None = None,
    cases: list[Case] | None = None,
    h: GuardHealth | None = None,
) -> dict[str, Any]:
    view = home_view(
        last if last is not None else summary(),
        cases or [],
        h or health(),
        endpoint=ENDPOINT,
        now_ms=NOW,
    )
    check_view(view)
    return view


def test_a_home_view_for_views_publish() -> None:
    view = home()
    assert view["type"] == "home"
    assert view["blocks"][0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": f"lockguard on {ENDPOINT}", "emoji": True},
    }


def test_counts_by_verdict_and_layout_and_the_oldest_locks_with_age_and_owner() -> None:
    last = summary(
        [
            finding(b"lock:nightly", held=72 * 3600, owner="cron-3"),
            finding(b"lock:hourly", held=3600),
        ],
        healthy=40,
        flagged=3,
    )
    text = all_text(home(last))
    assert "*By verdict*: 3 stale lease · 40 healthy · 2 not a lock" in text
    assert "*By layout*: 43 redis_py · 2 other" in text
    assert "*Flagged*\n3" in text
    line = next(t for t in text.splitlines() if "lock:nightly" in t)
    assert "3d00h" in line
    assert "owner `cron-3`" in line
    assert "healthy" in line
    assert "*Lock ages*" in text


def test_open_cases_with_their_state_and_no_finished_ones() -> None:
    cases = [
        case("LG-270115-pendin", State.PENDING),
        case("LG-270115-second", State.PENDING, approvals=(("U0ALICE", NOW - 60_000),)),
        case(
            "LG-270115-incomp",
            State.INCOMPLETE,
            decided_by="U0BOB",
            decided_ms=NOW,
            outcome_counts={"released": 3, "error": 1},
        ),
        case("LG-270115-releas", State.APPROVED, decided_by="U0BOB", decided_ms=NOW),
        case("LG-270115-expird", State.PENDING, created_ms=NOW - 2 * DAY),
        case("LG-270115-reject", State.REJECTED, decided_by="U0BOB", decided_ms=NOW),
        case("LG-270115-done00", State.RELEASED, decided_by="U0BOB", decided_ms=NOW),
    ]
    text = all_text(home(cases=cases))
    assert "*Open cases*: 4 cases" in text
    assert "`LG-270115-pendin` · *Waiting for a decision*" in text
    assert "`LG-270115-second` · *Waiting for a second approval*" in text
    assert "approved so far by <@U0ALICE>" in text  # a Home tab notifies nobody
    assert "`LG-270115-incomp` · *Incomplete*" in text
    assert "3 released · 1 error" in text
    assert "`lockguard approve LG-270115-incomp --by NAME --resume`" in text
    assert "`LG-270115-releas` · *Releasing* · 1 lock" in text
    for finished in ("expird", "reject", "done00"):
        assert f"LG-270115-{finished}" not in text
    assert text.index("LG-270115-incomp") < text.index("LG-270115-pendin")  # to finish first


def test_no_open_case_says_so() -> None:
    assert "*Open cases*: none" in all_text(home())


def test_guard_health_and_the_next_scheduled_scan() -> None:
    view = home(h=health(scans_ok=12, scans_failed=0, next_scan_ms=NOW + 5 * 60_000))
    text = all_text(view)
    assert "*Next scan*\n<!date^" in text
    assert "(in 5m00s)" in text
    assert "*Schedules run by*\n`lockguard-7d9f-abc`" in text
    assert "12 completed, 0 failed" in text
    assert ":rotating_light:" not in text


def test_no_scan_yet_and_overdue_are_at_the_top() -> None:
    view = home_view(None, [], health(last_success_ms=None), endpoint=ENDPOINT, now_ms=NOW)
    check_view(view)
    assert "lockguard has not completed a scan" in view["blocks"][0]["text"]["text"]
    assert "*lockguard has not completed a scan*" in view["blocks"][1]["text"]["text"]
    late = home(h=health(overdue=True, last_success_ms=NOW - 2 * HOUR))
    assert "*Scans are overdue*" in late["blocks"][1]["text"]["text"]


def test_late_and_missing_watches_are_listed() -> None:
    watches = (
        WatchState("job:fine", 10.0, 600.0, False),
        WatchState("job:gone", None, 600.0, True),
        WatchState("job:slow", 1200.0, 600.0, True),
    )
    text = all_text(home(h=health(watches=watches)))
    assert "`job:gone` · *missing*" in text
    assert "`job:slow` · *late*: updated 20m00s ago (allowed 10m00s)" in text
    assert text.index("job:gone") < text.index("job:slow") < text.index("job:fine")


def test_hostile_keys_owners_and_names_stay_inert() -> None:
    last = summary([finding(k, owner="<!here> *boss*") for k in HOSTILE])
    cases = [
        case("LG-<!channel>", State.PENDING, key=HOSTILE[0], approvals=(("<@U0EVIL>", NOW),)),
        case("LG-270115-aaaaaa", State.APPROVED, decided_by="<!everyone>", decided_ms=NOW),
    ]
    watches = (WatchState("<!here>", None, 1, True),)
    view = home(last, cases, health(leader="<@U1>", watches=watches))
    assert_inert(view)  # not even a mention: neither decider is a Slack user id
    text = all_text(view)
    assert "`lock:&lt;!channel&gt;`" in text
    assert "`\\x00\\xff&lt;@U1&gt;`" in text
    assert "approved by `&lt;!everyone&gt;`" in text


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(last=SCANS, cases=CASES, h=HEALTH)
@example(last=WORST["last"], cases=WORST["cases"], h=WORST["h"])
@example(last=None, cases=[], h=GuardHealth())
def test_every_home_view_fits_and_stays_inert(
    last: dict[str, Any] | None, cases: list[Case], h: GuardHealth
) -> None:
    view = home_view(last, cases, h, endpoint=ENDPOINT, now_ms=NOW)
    check_view(view)
    assert len(view["blocks"]) <= VIEW_BLOCKS
    assert_inert(view, mentions=True)
    assert any(t.startswith("*lockguard's own health*") for t in texts(view))
