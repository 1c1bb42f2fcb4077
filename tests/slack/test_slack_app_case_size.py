"""A case holds only the locks its message lists: an approver has seen every lock the Approve
click releases. A scan that flags more locks than Slack lists (the worst 200) opens a case of
the listed ones and says so; the rest are offered by a later case. A case posted late, from
Redis, lists every one of its locks in its thread (real redis-server, the signed-request
harness, every message checked against Slack's limits by the mock).
"""

from __future__ import annotations

import re
import time
from typing import Any

from bot.slack.blocks import ids
from bot.store.keyspace import CASES, case_key, slack_message_key
from tests.core.test_layouts import uuid1_hex
from tests.slack.test_slack_app_decisions import released_update
from tests.slack_app_harness import Factory, SlackAppHarness, blocks_text, buttons
from tests.slack_app_harness import slack_app as slack_app  # the fixture
from tests.slack_mock import Call

LIVE = {"LOCKGUARD_DRY_RUN": "false", "LOCKGUARD_APPROVERS": "U0ALICE"}
TWO_HOURS_MS = 7_200_000


def plant_many(app: SlackAppHarness, n: int) -> list[bytes]:
    """`n` redis-py locks with no TTL, taken 2 h ago (older for the lower numbers)."""
    now_ms = int(app.r.time()[0]) * 1000
    keys = [f"lock:many:{i:03d}".encode() for i in range(n)]
    with app.r.pipeline(transaction=False) as pipe:
        for i, key in enumerate(keys):
            pipe.set(key, uuid1_hex(now_ms - TWO_HOURS_MS - (n - i) * 1000))
        pipe.execute()
    return keys


def listed_keys(calls: list[Call]) -> set[bytes]:
    """Every lock key shown (as inert code) in these messages."""
    text = "".join(blocks_text(c) for c in calls)
    return {m.encode() for m in re.findall(r"`(lock:many:\d{3})`", text)}


def shown_with_thread(app: SlackAppHarness, post: Call, expected: int) -> set[bytes]:
    """The keys listed by `post` and its thread replies, once `expected` are (or 5 s)."""
    deadline = time.monotonic() + 5
    while True:
        thread = [
            p
            for p in app.fake.calls("chat.postMessage")
            if p.body.get("thread_ts") == app.posted_ts(post)
        ]
        shown = listed_keys([post, *thread])
        if len(shown) >= expected or time.monotonic() > deadline:
            return shown
        time.sleep(0.05)


def wait_listed(app: SlackAppHarness, case_id: str) -> None:
    """Until the case's thread is all in (its Approve button is refused till then)."""
    deadline = time.monotonic() + 5
    while app.r.hget(slack_message_key(case_id), "listed") != b"1":
        assert time.monotonic() < deadline, "the thread never completed"
        time.sleep(0.02)


def refuse_thread_replies(app: SlackAppHarness) -> None:
    """From now on the mock refuses every reply in a thread (the message itself goes out)."""
    check = app.fake.on_message

    def hook(body: dict[str, Any]) -> str | None:
        if body.get("thread_ts"):
            return "msg_blocks_too_long"
        return check(body) if check is not None else None

    app.fake.on_message = hook


def test_a_case_of_more_locks_than_listed_holds_only_the_listed_ones(slack_app: Factory) -> None:
    app = slack_app(**LIVE)
    keys = plant_many(app, 203)
    case_id, post = app.scan()
    assert case_id
    case_text = blocks_text(post)
    assert "approving releases *200 locks*" in case_text
    assert "3 releasable locks beyond those listed here" in case_text
    assert "a later case offers them" in case_text
    shown = shown_with_thread(app, post, 200)
    wait_listed(app, case_id)

    reply = app.click(ids.APPROVE, case_id, user_id="U0ALICE", message_ts=app.posted_ts(post))
    assert reply.status == 200
    assert "Released" in released_update(app, timeout=15).body["text"]
    released = {k for k in keys if not app.r.exists(k)}
    assert len(released) == 200
    assert released <= shown  # nothing released that the approver was not shown
    left = set(keys) - released
    assert len(left) == 3

    second_id, second = app.scan()
    assert second_id
    assert second_id != case_id
    assert "approving releases *3 locks*" in blocks_text(second)
    assert "beyond those listed here" not in blocks_text(second)
    assert listed_keys([second]) == left


def test_a_case_posted_late_lists_every_one_of_its_locks_in_its_thread(slack_app: Factory) -> None:
    """A case whose findings message Slack did not take is posted later from Redis: its message
    lists the first of its locks, its thread every other one, before anyone can approve."""
    app = slack_app(**LIVE, repost_every=3600)
    keys = plant_many(app, 120)
    app.fake.fail("chat.postMessage", error="fatal_error", status=500, times=None)
    assert app.slash("scan", response_url=app.fake.response_url("scan")).status == 200
    assert "waits in Redis" in app.fake.wait_for("response_url", timeout=10)[0].body["text"]
    [case_id] = [k.decode() for k in app.r.zrange(CASES, 0, -1)]
    app.fake.clear_faults()
    app.fake.clear()
    app.served.slack.reposter.run_once(wait=True)
    posts = app.fake.calls("chat.postMessage")
    [post] = [p for p in posts if "thread_ts" not in p.body]
    assert buttons(post) == {ids.APPROVE: case_id, ids.REJECT: case_id}
    assert "Posted late" in blocks_text(post)
    assert "more locks in this case, in the thread" in blocks_text(post)
    thread = [p for p in posts if p.body.get("thread_ts") == app.posted_ts(post)]
    assert thread
    assert f"of case `{case_id}`" in blocks_text(thread[0])
    assert listed_keys([post, *thread]) == set(keys)
    assert app.fake.hook_errors == []


def test_a_case_whose_thread_slack_refused_cannot_be_approved_only_rejected(
    slack_app: Factory,
) -> None:
    app = slack_app(**LIVE)
    keys = plant_many(app, 60)  # the message lists 20, the thread the other 40
    refuse_thread_replies(app)
    case_id, post = app.scan()
    assert case_id
    [update] = app.fake.wait_for("chat.update")
    assert update.body["ts"] == app.posted_ts(post)
    assert buttons(update) == {ids.REJECT: case_id}  # no Approve
    assert "Slack did not take the whole thread" in blocks_text(update)
    assert "cannot be approved here" in blocks_text(update)
    assert app.r.hget(slack_message_key(case_id), "listed") == b"0"

    # the Approve button of the message as first posted: refused, nothing released
    app.click(ids.APPROVE, case_id, user_id="U0ALICE", message_ts=app.posted_ts(post))
    [told] = app.fake.wait_for("chat.postEphemeral")
    assert "Nothing was approved: not every lock of case" in told.body["text"]
    assert app.r.hget(case_key(case_id), "state") == b"pending"
    assert all(app.r.exists(k) for k in keys)


def test_an_approve_click_before_the_thread_is_in_is_refused(slack_app: Factory) -> None:
    app = slack_app(**LIVE)
    keys = plant_many(app, 60)
    case_id, post = app.scan()
    wait_listed(app, case_id)
    app.r.hset(slack_message_key(case_id), "listed", 0)  # as while its thread is being posted
    app.click(ids.APPROVE, case_id, user_id="U0ALICE", message_ts=app.posted_ts(post))
    [told] = app.fake.wait_for("chat.postEphemeral")
    assert "click Approve again once it has" in told.body["text"]
    assert all(app.r.exists(k) for k in keys)
    app.r.hset(slack_message_key(case_id), "listed", 1)  # the thread is in
    app.click(ids.APPROVE, case_id, user_id="U0ALICE", message_ts=app.posted_ts(post))
    assert "Released" in released_update(app, timeout=10).body["text"]
    assert not any(app.r.exists(k) for k in keys)


def test_a_case_posted_late_whose_thread_slack_refused_cannot_be_approved(
    slack_app: Factory,
) -> None:
    app = slack_app(**LIVE, repost_every=3600)
    plant_many(app, 120)
    app.fake.fail("chat.postMessage", error="fatal_error", status=500, times=None)
    assert app.slash("scan", response_url=app.fake.response_url("scan")).status == 200
    app.fake.wait_for("response_url", timeout=10)
    [case_id] = [k.decode() for k in app.r.zrange(CASES, 0, -1)]
    app.fake.clear_faults()
    refuse_thread_replies(app)
    app.served.slack.reposter.run_once(wait=True)
    [update] = app.fake.wait_for("chat.update")
    assert buttons(update) == {ids.REJECT: case_id}
    assert "Posted late" in blocks_text(update)
    assert "Slack did not take the whole thread" in blocks_text(update)
    assert app.r.hget(slack_message_key(case_id), "listed") == b"0"
