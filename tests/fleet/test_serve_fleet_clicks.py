"""A click on a fleet's case message reaches one Redis: the decision buttons' block names the
target that holds the case (`lockguard_decision:<target>`), so the click looks there alone. The
name is hostile input: an unknown one, or a target without the case, is refused (not echoed)
and nothing is decided; a message posted before (`lockguard_decision`, no target) is looked for
in every target as before."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from bot import serve
from bot.config import load_settings
from bot.demo.embedded import RedisProcess
from bot.serve.fleet_operations import FleetOperations
from bot.slack.blocks import ids
from bot.store.keyspace import case_key
from tests.fleet.test_serve_fleet import FAST, fleet, fleet_env
from tests.fleet.test_serve_fleet_slack import app, channels, plant  # noqa: F401  (fixtures)
from tests.fleet.test_serve_fleet_slack import clients as clients  # the fixtures
from tests.ops.test_ops_serve import wait_until
from tests.slack_app_harness import SlackAppHarness, buttons
from tests.slack_mock import Call, FakeSlack


def jobs_idle(aps: Any, timeout: float = 10.0) -> None:
    """A positive signal that every job the (paused) scheduler handed to the fleet's job pool
    has finished, as `app.idle()` for the Slack app's pool: one barrier job per thread, queued
    behind them, all running at once. The scheduler hands jobs over holding its job-store lock
    and checks that it is not paused first, so once that lock has been taken after `pause()`
    nothing more is handed over. (APScheduler 3 has no public way to either.)"""
    with aps._jobstores_lock:
        pass
    pool = aps._lookup_executor("default")._pool  # a concurrent.futures.ThreadPoolExecutor
    barrier = threading.Barrier(pool._max_workers + 1, timeout=timeout)
    for _ in range(pool._max_workers):
        pool.submit(barrier.wait)
    barrier.wait()


def _exists_calls(r: redis.Redis) -> int:
    return int(r.info("commandstats").get("cmdstat_exists", {}).get("calls", 0))


def _decision_block(call: Call) -> dict[str, Any]:
    [block] = [b for b in call.body["blocks"] if b.get("type") == "actions"]
    return block


@pytest.fixture
def posted(
    app: SlackAppHarness,  # noqa: F811
    clients: dict[str, redis.Redis],
    slack_fake: FakeSlack,
) -> dict[str, Call]:
    """The queue's and the orders' case messages, the schedules paused once they are posted."""
    plant(clients["queue"], b"lock:stuck")
    plant(clients["orders"], b"lock:stuck")
    wait_until(lambda: {"C0QUEUE", "C0ORDERS"} <= channels(slack_fake), 10)
    assert isinstance(app.served.ops, FleetOperations)
    app.served.ops.aps.pause()
    jobs_idle(app.served.ops.aps)  # a scan running now has finished
    app.idle()  # and so has whatever it handed to the Slack app's workers
    posts = {c.body["channel"]: c for c in slack_fake.calls("chat.postMessage")}
    return {"queue": posts["C0QUEUE"], "orders": posts["C0ORDERS"]}


def _told(harness: SlackAppHarness, fake: FakeSlack, post: Call, block_id: str) -> str:
    told = len(fake.calls("chat.postEphemeral"))
    case_id = buttons(post)[ids.APPROVE]
    reply = harness.click(
        ids.APPROVE,
        case_id,
        channel_id=post.body["channel"],
        message_ts=harness.posted_ts(post),
        block_id=block_id,
    )
    assert reply.status == 200
    [refusal] = fake.wait_for("chat.postEphemeral", told + 1)[told:]
    return str(refusal.body["text"])


def test_a_click_naming_its_target_looks_in_no_other(
    app: SlackAppHarness,  # noqa: F811
    clients: dict[str, redis.Redis],
    posted: dict[str, Call],
) -> None:
    queue, orders, sessions = clients["queue"], clients["orders"], clients["sessions"]
    block = _decision_block(posted["queue"])
    assert block["block_id"] == "lockguard_decision:queue"
    assert [e["action_id"] for e in block["elements"]] == [ids.APPROVE, ids.REJECT]
    case_id = buttons(posted["queue"])[ids.APPROVE]
    assert {e["value"] for e in block["elements"]} == {case_id}  # the value: the case id only
    assert _decision_block(posted["orders"])["block_id"] == "lockguard_decision:orders"
    for r in clients.values():
        r.config_resetstat()
    reply = app.click(
        ids.APPROVE,
        case_id,
        channel_id="C0QUEUE",
        message_ts=app.posted_ts(posted["queue"]),
        block_id=block["block_id"],
    )
    assert reply.status == 200
    wait_until(lambda: not queue.exists(b"lock:stuck"), 5)
    assert (_exists_calls(orders), _exists_calls(sessions)) == (0, 0)
    assert orders.exists(b"lock:stuck")
    # An old message's block names no target: looked for in every target, as before.
    for r in clients.values():
        r.config_resetstat()
    old = buttons(posted["orders"])[ids.APPROVE]
    reply = app.click(
        ids.APPROVE, old, channel_id="C0ORDERS", message_ts=app.posted_ts(posted["orders"])
    )
    assert reply.status == 200
    wait_until(lambda: not orders.exists(b"lock:stuck"), 5)
    assert _exists_calls(sessions) >= 1  # the lookup the target in the block saves


def test_a_forged_target_is_refused_and_nothing_is_decided(
    app: SlackAppHarness,  # noqa: F811
    clients: dict[str, redis.Redis],
    slack_fake: FakeSlack,
    posted: dict[str, Call],
) -> None:
    queue = clients["queue"]
    post = posted["queue"]
    case_id = buttons(post)[ids.APPROVE]
    text = _told(app, slack_fake, post, "lockguard_decision:<!channel>" + "x" * 300)
    assert "names no target lockguard has" in text
    assert "<!channel>" not in text
    text = _told(app, slack_fake, post, "lockguard_decision:nosuch")
    assert "names no target lockguard has" in text
    assert "nosuch" not in text
    # a real target that does not hold the case
    text = _told(app, slack_fake, post, "lockguard_decision:sessions")
    assert f"case {case_id} is not on target sessions" in text
    app.settle()
    assert queue.exists(b"lock:stuck")
    assert queue.hget(case_key(case_id), b"state") == b"pending"


def test_the_reject_modal_carries_the_target_to_its_submission(
    app: SlackAppHarness,  # noqa: F811
    clients: dict[str, redis.Redis],
    slack_fake: FakeSlack,
    posted: dict[str, Call],
) -> None:
    queue = clients["queue"]
    post = posted["queue"]
    case_id = buttons(post)[ids.REJECT]
    reply = app.click(
        ids.REJECT,
        case_id,
        channel_id="C0QUEUE",
        message_ts=app.posted_ts(post),
        block_id="lockguard_decision:queue",
    )
    assert reply.status == 200
    [opened] = slack_fake.wait_for("views.open", 1)
    view = opened.body["view"]
    if isinstance(view, str):
        view = json.loads(view)
    assert view["private_metadata"] == f"{case_id}:queue"
    assert len(view["private_metadata"]) <= 3000
    for r in clients.values():
        r.config_resetstat()
    assert app.submit_reject(view["private_metadata"], "a test lock").status == 200
    wait_until(lambda: queue.hget(case_key(case_id), b"state") == b"rejected", 5)
    assert (_exists_calls(clients["orders"]), _exists_calls(clients["sessions"])) == (0, 0)
    assert queue.exists(b"lock:stuck")  # a rejection touches no lock


@pytest.fixture
def typed_app(
    servers: dict[str, RedisProcess],
    clients: dict[str, redis.Redis],
    slack_fake: FakeSlack,
) -> Iterator[SlackAppHarness]:
    """The fleet, approving a case of more than one lock by its number typed."""
    env = fleet_env(servers, slack_fake) | {
        "LOCKGUARD_DRY_RUN": "false",
        "LOCKGUARD_CONFIRM_TYPED_ABOVE": "1",
    }
    served = serve.start(
        load_settings(env=env), port=0, err=io.StringIO(), tuning=FAST, targets=fleet(servers, env)
    )
    yield SlackAppHarness(slack_fake, served, clients["orders"])
    served.stop()


def test_a_typed_approval_reaches_its_target_alone(
    typed_app: SlackAppHarness,
    clients: dict[str, redis.Redis],
    slack_fake: FakeSlack,
) -> None:
    queue = clients["queue"]
    plant(queue, b"lock:one")
    plant(queue, b"lock:two")
    wait_until(lambda: "C0QUEUE" in channels(slack_fake), 10)
    [post] = [c for c in slack_fake.calls("chat.postMessage") if c.body["channel"] == "C0QUEUE"]
    block = _decision_block(post)
    case_id = buttons(post)[ids.APPROVE]
    reply = typed_app.click(
        ids.APPROVE,
        case_id,
        channel_id="C0QUEUE",
        message_ts=typed_app.posted_ts(post),
        block_id=block["block_id"],
    )
    assert reply.status == 200
    [opened] = slack_fake.wait_for("views.open", 1)
    view = opened.body["view"]
    view = json.loads(view) if isinstance(view, str) else view
    assert view["callback_id"] == ids.APPROVE_MODAL
    assert view["private_metadata"] == f"{case_id}:queue"
    for r in clients.values():
        r.config_resetstat()
    wrong = typed_app.submit_approve(view["private_metadata"], "3")
    assert wrong.status == 200
    assert "errors" in wrong.text  # the modal stays open; nothing released
    assert queue.exists(b"lock:one")
    assert typed_app.submit_approve(view["private_metadata"], "2").status == 200
    wait_until(lambda: not queue.exists(b"lock:one", b"lock:two"), 5)
    assert (_exists_calls(clients["orders"]), _exists_calls(clients["sessions"])) == (0, 0)
