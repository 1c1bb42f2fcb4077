"""`/lockguard cases` over a fleet, through Slack's protocol into `serve` (three live
redis-servers, one dead): every target's open cases, each line naming its target, the dead
target in one line; within Block Kit's limits however many targets there are."""

from __future__ import annotations

import json
import time

import redis

from bot.cases.case import State
from bot.slack.blocks import ids
from bot.slack.blocks.status import TargetCases, fleet_cases_message
from tests.block_kit import check_message
from tests.fleet.conftest import DEAD
from tests.fleet.test_serve_fleet import clients as clients  # the fixtures
from tests.fleet.test_serve_fleet_slack import app as app
from tests.fleet.test_serve_fleet_slack import channels, plant
from tests.ops.test_ops_serve import wait_until
from tests.slack.test_slack_messages import NOW, case
from tests.slack_app_harness import SlackAppHarness, buttons
from tests.slack_mock import Call, FakeSlack


def answer(app: SlackAppHarness, text: str, target: str) -> Call:
    assert app.slash(text, response_url=app.fake.response_url(target)).status == 200
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for call in app.fake.calls("response_url"):
            if call.target == target:
                return call
        time.sleep(0.02)
    raise AssertionError("no answer")


def test_slash_cases_lists_every_targets_open_cases_naming_each(
    app: SlackAppHarness, clients: dict[str, redis.Redis], slack_fake: FakeSlack
) -> None:
    plant(clients["orders"], b"lock:stuck")
    plant(clients["queue"], b"lock:stuck")
    wait_until(lambda: {"C0QUEUE", "C0ORDERS"} <= channels(slack_fake), 10)
    posts = {c.body["channel"]: c for c in slack_fake.calls("chat.postMessage")}
    orders_case = buttons(posts["C0ORDERS"])[ids.APPROVE]
    queue_case = buttons(posts["C0QUEUE"])[ids.APPROVE]
    call = answer(app, "cases", "fleet-cases")
    check_message(call.body)
    text = json.dumps(call.body, ensure_ascii=False)
    assert f"*`orders`* · `{orders_case}`" in text
    assert f"*`queue`* · `{queue_case}`" in text
    assert f"*`{DEAD}`* · its Redis did not answer" in text
    assert "1 target with no open case" in text  # sessions
    assert "2 open cases on 4 targets" in call.body["text"]


def test_the_fleets_cases_stay_within_block_kit_limits_with_50_targets() -> None:
    targets = [
        TargetCases(f"target-{i:02d}", (), 0, problem="redis: unreachable " + "x" * 300)
        for i in range(50)
    ]
    message = fleet_cases_message(targets)
    check_message(message)
    text = json.dumps(message)
    assert "target-00" in text
    assert "more lines" in text or "target-49" in text


def test_a_dry_run_approval_is_not_listed_as_open_as_status_counts_it() -> None:
    """A dry-run approval released nothing and is final: the fleet's `/lockguard cases` lists it
    no more than `/lockguard status` counts it (`bot.slack.blocks.status.is_open`)."""
    dry, pending = case(1, State.APPROVED, dry_run=True), case(2)
    target = TargetCases("orders", (dry, pending), NOW)
    assert target.open() == [pending]
    text = json.dumps(fleet_cases_message([target]))
    assert pending.id in text
    assert dry.id not in text
