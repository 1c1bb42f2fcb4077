"""The Home tab over a fleet, through Slack's protocol into `serve` (three live redis-servers,
one dead): a section per target, worst first (the dead one, then the one with flagged locks),
each naming its target; within Block Kit's view limits with 50 targets."""

from __future__ import annotations

import json

import redis

from bot.slack.blocks.home import MAX_TARGETS, TargetHome, fleet_home_view
from bot.slack.blocks.kit import VIEW_BLOCKS
from tests.block_kit import check_view
from tests.fleet.conftest import DEAD, LIVE
from tests.fleet.test_serve_fleet import clients as clients  # the fixtures
from tests.fleet.test_serve_fleet_slack import app as app
from tests.fleet.test_serve_fleet_slack import channels, plant
from tests.ops.test_ops_serve import wait_until
from tests.slack_app_harness import SlackAppHarness
from tests.slack_mock import FakeSlack
from tests.slack_requests import app_home_opened, event_callback

SUMMARY = {
    "scanned": 5,
    "finding_count": 1,
    "by_reason": {"infinite_ttl": 1, "healthy": 4},
    "server_time_ms": 1_796_000_000_000,
    "oldest_held_seconds": 7200.0,
}


def test_the_home_tab_shows_every_target_worst_first(
    app: SlackAppHarness, clients: dict[str, redis.Redis], slack_fake: FakeSlack
) -> None:
    plant(clients["queue"], b"lock:stuck")
    wait_until(lambda: "C0QUEUE" in channels(slack_fake), 10)
    wait_until(lambda: all(clients[n].exists(b"{lockguard}:scan:last") for n in LIVE), 10)
    reply = event_callback(app.url, "lg-signing-secret-for-tests", event=app_home_opened())
    assert reply.status == 200
    [published] = app.fake.wait_for("views.publish")
    view = published.body["view"]
    check_view(view)
    sections = [b["text"]["text"] for b in view["blocks"] if b["type"] == "section"]
    assert [s.split("*")[1] for s in sections] == [f"`{n}`" for n in (DEAD, "queue")] + [
        f"`{n}`" for n in sorted(set(LIVE) - {"queue"})
    ]
    assert "its Redis did not answer" in sections[0]
    assert "1 lock flagged" in sections[1]
    assert "*Open cases*: 1" in sections[1]
    assert "(team=platform)" in sections[1]
    assert "lockguard on 4 targets" in json.dumps(view)


def test_the_fleets_home_tab_stays_within_view_limits_with_50_targets() -> None:
    targets = [
        TargetHome(
            f"target-{i:02d}",
            "team=" + "t" * 150,
            f"redis://10.0.0.{i}:6379/0",
            last_scan=SUMMARY if i % 3 else None,
            open_cases=i,
            problem="" if i % 7 else "redis: unreachable",
        )
        for i in range(50)
    ]
    view = fleet_home_view(targets, now_ms=1_796_000_000_000)
    check_view(view)
    assert len(view["blocks"]) <= VIEW_BLOCKS
    sections = [b for b in view["blocks"] if b["type"] == "section"]
    assert 0 < len(sections) <= MAX_TARGETS
    assert "did not answer" in sections[0]["text"]["text"]  # the down ones first
    text = json.dumps(view)
    assert f"and {50 - len(sections)} more targets" in text
