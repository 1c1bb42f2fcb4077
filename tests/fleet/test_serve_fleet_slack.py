"""Slack over a fleet, through its protocol (signed requests into the Bolt app, the mock Web
API): a target that is not the Slack app's own posts its findings in its own channel, and an
Approve click on that message releases the lock in that target's Redis only. The button's case
id is hostile: one that two targets hold is refused and nothing is released anywhere."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
import redis

from bot import serve
from bot.config import load_settings
from bot.demo.embedded import RedisProcess
from bot.slack.blocks import ids
from bot.store.keyspace import case_key, slack_message_key
from tests.block_kit import check_message
from tests.core.test_layouts import uuid1_hex
from tests.fleet.test_serve_fleet import DEAD, FAST, LIVE, fleet, fleet_env
from tests.fleet.test_serve_fleet import clients as clients  # the fixtures
from tests.ops.test_ops_serve import status_text, wait_until
from tests.slack_app_harness import SlackAppHarness, buttons
from tests.slack_mock import FakeSlack

TWO_HOURS_MS = 7_200_000


@pytest.fixture
def app(
    servers: dict[str, RedisProcess], clients: dict[str, redis.Redis], slack_fake: FakeSlack
) -> Iterator[SlackAppHarness]:
    env = fleet_env(servers, slack_fake) | {"LOCKGUARD_DRY_RUN": "false"}
    served = serve.start(
        load_settings(env=env), port=0, err=io.StringIO(), tuning=FAST, targets=fleet(servers, env)
    )
    yield SlackAppHarness(slack_fake, served, clients["orders"])
    served.stop()


def plant(r: redis.Redis, key: bytes) -> bytes:
    """A redis-py lock with no TTL whose uuid1 token says it was taken two hours ago."""
    token = uuid1_hex(int(r.time()[0]) * 1000 - TWO_HOURS_MS)
    r.set(key, token)
    return token


def channels(fake: FakeSlack) -> set[str]:
    return {c.body["channel"] for c in fake.calls("chat.postMessage")}


def test_an_approval_acts_on_the_cases_own_target_only(
    app: SlackAppHarness, clients: dict[str, redis.Redis], slack_fake: FakeSlack
) -> None:
    orders, queue = clients["orders"], clients["queue"]
    token = plant(orders, b"lock:stuck")
    plant(queue, b"lock:stuck")  # the same key on another target
    wait_until(lambda: {"C0QUEUE", "C0ORDERS"} <= channels(slack_fake), 10)
    posts = {c.body["channel"]: c for c in slack_fake.calls("chat.postMessage")}
    post = posts["C0QUEUE"]  # the queue's findings, in the queue's channel
    check_message(post.body)
    assert "flagged on queue (team=platform) redis://127.0.0.1:" in post.body["text"]
    assert "flagged on orders (team=payments) redis://" in posts["C0ORDERS"].body["text"]
    case_id = buttons(post)[ids.APPROVE]
    assert queue.exists(case_key(case_id))
    orders_case = buttons(posts["C0ORDERS"])[ids.APPROVE]
    # The same case id on two targets (copied here): refused, told, nothing released.
    for key in (case_key(case_id), slack_message_key(case_id)):
        orders.restore(key, 0, queue.dump(key), replace=True)
    told = len(slack_fake.calls("chat.postEphemeral"))
    reply = app.click(ids.APPROVE, case_id, channel_id="C0QUEUE", message_ts=app.posted_ts(post))
    assert reply.status == 200
    [refusal] = slack_fake.wait_for("chat.postEphemeral", told + 1)[told:]
    assert "several targets" in refusal.body["text"]
    assert "orders" in refusal.body["text"]
    assert queue.exists(b"lock:stuck")
    assert orders.get(b"lock:stuck") == token
    orders.delete(case_key(case_id), slack_message_key(case_id))
    # Now one target holds it: the click releases the queue's lock, and no byte of orders'.
    before = {k: orders.dump(k) for k in orders.keys(b"lock:*")}
    reply = app.click(ids.APPROVE, case_id, channel_id="C0QUEUE", message_ts=app.posted_ts(post))
    assert reply.status == 200
    wait_until(lambda: not queue.exists(b"lock:stuck"), 5)
    assert {k: orders.dump(k) for k in orders.keys(b"lock:*")} == before
    assert orders.get(b"lock:stuck") == token
    assert orders.hget(case_key(orders_case), b"state") == b"pending"


def test_a_malformed_case_id_is_refused_without_a_lookup(
    app: SlackAppHarness, clients: dict[str, redis.Redis], slack_fake: FakeSlack
) -> None:
    plant(clients["queue"], b"lock:stuck")
    wait_until(lambda: "C0QUEUE" in channels(slack_fake), 10)
    told = len(slack_fake.calls("chat.postEphemeral"))
    hostile = "LG-*<!channel>" + "x" * 300
    assert app.click(ids.APPROVE, hostile, channel_id="C0QUEUE").status == 200
    [refusal] = slack_fake.wait_for("chat.postEphemeral", told + 1)[told:]
    assert "<!channel>" not in refusal.body["text"]
    assert clients["queue"].exists(b"lock:stuck")


def test_slash_status_lists_the_targets_and_scan_takes_a_target(
    app: SlackAppHarness, clients: dict[str, redis.Redis], slack_fake: FakeSlack
) -> None:
    wait_until(lambda: all(clients[n].exists(b"{lockguard}:scan:last") for n in LIVE), 10)
    text = status_text(app, "fleet-status")
    assert "*Targets*: 4, 1 not healthy" in text
    for name in LIVE:
        assert f"`{name}`" in text
    assert "redis: unreachable" in text
    [answer] = [c for c in slack_fake.calls("response_url") if c.target == "fleet-status"]
    check_message(answer.body)
    # `/lockguard scan TARGET` in that target's channel scans that target
    plant(clients["queue"], b"lock:typed")
    before = len(slack_fake.calls("chat.postMessage"))
    reply = app.slash("scan queue lock:typed*", channel_id="C0QUEUE")
    assert reply.status == 200
    assert "Scanning" in reply.text
    posted = slack_fake.wait_for("chat.postMessage", before + 1)[before:]
    assert any(c.body["channel"] == "C0QUEUE" and "lock:typed" in str(c.body) for c in posted)
    # ... typed elsewhere, a pointer to its channel; an unknown target, the names
    assert "<#C0QUEUE>" in app.slash("scan queue", channel_id="C0ALERTS").text
    unknown = app.slash("scan nosuch-target", channel_id="C0ALERTS").text
    assert "No target `nosuch-target`" in unknown
    assert all(f"`{n}`" in unknown for n in (*LIVE, DEAD))


def test_the_first_target_s_slash_scans_are_typed_and_posted_in_its_own_channel(
    app: SlackAppHarness, clients: dict[str, redis.Redis], slack_fake: FakeSlack
) -> None:
    """`orders` is the first target, with `channel: C0ORDERS`: `/lockguard scan orders` typed
    there scans it and posts there; typed in LOCKGUARD_SLACK_CHANNEL it gets a pointer there
    (before, it was refused in its own channel and posted orders' findings and buttons in the
    ops channel)."""
    wait_until(lambda: all(clients[n].exists(b"{lockguard}:scan:last") for n in LIVE), 10)
    plant(clients["orders"], b"lock:first-target")
    assert "<#C0ORDERS>" in app.slash("scan orders", channel_id="C0ALERTS").text
    assert "<#C0ORDERS>" in app.slash("scan", channel_id="C0ALERTS").text  # no word: orders
    before = len(slack_fake.calls("chat.postMessage"))
    reply = app.slash("scan orders lock:first*", channel_id="C0ORDERS")
    assert "Scanning" in reply.text
    posted = slack_fake.wait_for("chat.postMessage", before + 1)[before:]
    mine = [c for c in posted if "lock:first-target" in str(c.body)]
    assert mine
    assert {c.body["channel"] for c in mine} == {"C0ORDERS"}


def test_someone_who_may_not_scan_is_told_no_target_names(
    servers: dict[str, RedisProcess], clients: dict[str, redis.Redis], slack_fake: FakeSlack
) -> None:
    """`/lockguard scan nosuch-target` lists the fleet's targets to a scanner only."""
    env = fleet_env(servers, slack_fake) | {"LOCKGUARD_APPROVERS": "U0ALICE"}
    served = serve.start(
        load_settings(env=env), port=0, err=io.StringIO(), tuning=FAST, targets=fleet(servers, env)
    )
    try:
        app = SlackAppHarness(slack_fake, served, clients["orders"])
        told = app.slash("scan nosuch-target", user_id="U0MALLORY").text
        assert "you may not run `/lockguard scan`" in told
        assert not any(f"`{n}`" in told for n in (*LIVE, DEAD))
        named = app.slash("scan nosuch-target", user_id="U0ALICE").text
        assert all(f"`{n}`" in named for n in (*LIVE, DEAD))
    finally:
        served.stop()


def test_a_targets_case_too_big_for_its_message_gets_its_list_before_approve_works(
    app: SlackAppHarness, clients: dict[str, redis.Redis], slack_fake: FakeSlack
) -> None:
    """A fleet target's case of more locks than its message shows: the whole list goes into the
    message's thread as a file, and the case counts as shown (Approve accepted) only once it is
    in. (The fleet's findings once lost the list: the message was posted, no file followed, and
    the case counted as shown whole.)"""
    orders = clients["orders"]
    now_ms = int(orders.time()[0]) * 1000
    keys = [f"lock:many:{i:03d}".encode() for i in range(300)]
    with orders.pipeline(transaction=False) as pipe:
        for i, key in enumerate(keys):
            pipe.set(key, uuid1_hex(now_ms - TWO_HOURS_MS - i * 1000))
        pipe.execute()
    wait_until(
        lambda: any(
            c.body["channel"] == "C0ORDERS" and ids.APPROVE in buttons(c)
            for c in slack_fake.calls("chat.postMessage")
        ),
        20,
    )
    post = next(
        c
        for c in slack_fake.calls("chat.postMessage")
        if c.body["channel"] == "C0ORDERS" and ids.APPROVE in buttons(c)
    )
    case_id = buttons(post)[ids.APPROVE]
    assert orders.hget(case_key(case_id), "lock_count") == b"300"
    name = f"lockguard-{case_id}.csv"

    def uploaded() -> list[object]:
        return [
            c
            for c in slack_fake.calls("files.completeUploadExternal")
            if [f.get("title") for f in c.body.get("files") or []] == [name]
        ]

    wait_until(lambda: orders.hget(slack_message_key(case_id), "listed") == b"1", 20)
    [complete] = uploaded()  # listed only once its file is in
    assert complete.body["thread_ts"] == app.posted_ts(post)  # type: ignore[attr-defined]
    assert complete.body["channel_id"] == "C0ORDERS"  # type: ignore[attr-defined]
    [file_id] = [f["id"] for f in complete.body["files"]]  # type: ignore[attr-defined]
    [upload] = [c for c in slack_fake.calls("upload") if c.target == file_id]
    assert upload.body["content"].count(b"lock:many:") == 300
