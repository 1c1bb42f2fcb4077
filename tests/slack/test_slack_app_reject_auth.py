"""A click on Reject by someone who may not decide changes nothing in Redis: the message it was
clicked on is not adopted as the case's message, and the person is told why, only them. Through
Slack's protocol: signed requests into the running app, the Web API calls it made recorded."""

from __future__ import annotations

import time

import redis

from bot.slack.blocks import ids
from bot.store.keyspace import PREFIX, case_key, slack_message_key
from tests.slack_app_harness import ALERTS, Factory, SlackAppHarness
from tests.slack_app_harness import slack_app as slack_app  # the fixture
from tests.slack_mock import Call

LIVE = {"LOCKGUARD_DRY_RUN": "false"}
SEEN = PREFIX + b"slack:seen:"  # the replay marks every signed request leaves (bot.slack.replays)


def state(r: redis.Redis) -> dict[bytes, bytes | None]:
    """Every key but the replay marks, with its exact serialized bytes."""
    return {k: r.dump(k) for k in r.scan_iter(count=1000) if not k.startswith(SEEN)}


def refused_click(app: SlackAppHarness, case_id: str, post: Call, **kw: str) -> Call:
    """Reject clicked on the case's message by someone refused: the one ephemeral they get."""
    reply = app.click(ids.REJECT, case_id, message_ts=app.posted_ts(post), **kw)
    assert reply.status == 200
    [told] = app.fake.wait_for("chat.postEphemeral")
    app.idle()  # anything else the click's work would do has been done
    return told


def lost_message_record(app: SlackAppHarness) -> tuple[str, Call]:
    """A pending case whose message Redis has no record of: what a Reject click adopts."""
    app.plant()
    case_id, post = app.scan()
    assert case_id
    key = slack_message_key(case_id)
    deadline = time.monotonic() + 5  # the post's record may land just after the scan returns:
    while not app.r.exists(key) and time.monotonic() < deadline:  # delete it once it is there
        time.sleep(0.01)
    app.r.delete(key)
    return case_id, post


def test_a_non_approvers_reject_click_opens_nothing_and_writes_nothing(
    slack_app: Factory,
) -> None:
    app = slack_app(**LIVE, LOCKGUARD_APPROVERS="U0ALICE")
    case_id, post = lost_message_record(app)
    before = state(app.r)
    told = refused_click(app, case_id, post, user_id="U0MALLORY")
    assert (told.body["channel"], told.body["user"]) == (ALERTS, "U0MALLORY")
    assert "not an approver" in told.body["text"]
    assert app.fake.calls("views.open") == []
    assert app.fake.calls("chat.update") == []
    assert app.r.exists(slack_message_key(case_id)) == 0
    assert state(app.r) == before


def test_a_clicker_from_another_team_is_refused_and_nothing_is_written(
    slack_app: Factory,
) -> None:
    app = slack_app(**LIVE, LOCKGUARD_APPROVERS="U0ALICE")
    case_id, post = lost_message_record(app)
    before = state(app.r)
    told = refused_click(app, case_id, post, user_id="U0ALICE", team_id="T0OUTSIDER")
    assert "another team" in told.body["text"]
    assert app.fake.calls("views.open") == []
    assert state(app.r) == before


def test_outside_the_approver_group_the_modal_may_open_but_nothing_is_adopted(
    slack_app: Factory,
) -> None:
    """Who is in the group is known only by asking Slack, which the 3-second trigger cannot
    wait for: the modal opens, the pool asks, refuses, and writes nothing; the submission is
    refused too, and the case stays pending."""
    app = slack_app(**LIVE, LOCKGUARD_APPROVER_GROUP="S0ONCALL", LOCKGUARD_SCANNERS="U0ALICE")
    app.fake.set_usergroup("S0ONCALL", ["U0BOB"])
    case_id, post = lost_message_record(app)
    before = state(app.r)
    told = refused_click(app, case_id, post, user_id="U0CAROL")
    assert told.body["user"] == "U0CAROL"
    assert "not an approver" in told.body["text"]
    assert len(app.fake.calls("views.open")) == 1
    assert app.fake.calls("usergroups.users.list")[0].body["usergroup"] == "S0ONCALL"
    assert state(app.r) == before
    done = app.submit_reject(case_id, "not mine to decide", user_id="U0CAROL")
    assert done.status == 200
    assert len(app.fake.wait_for("chat.postEphemeral", 2)) == 2
    app.settle()
    assert app.r.hget(case_key(case_id), "state") == b"pending"
    assert state(app.r) == before


def test_an_approvers_reject_click_adopts_the_message_it_came_from(slack_app: Factory) -> None:
    app = slack_app(**LIVE, LOCKGUARD_APPROVERS="U0ALICE")
    case_id, post = lost_message_record(app)
    reply = app.click(ids.REJECT, case_id, user_id="U0ALICE", message_ts=app.posted_ts(post))
    assert reply.status == 200
    app.fake.wait_for("views.open")
    deadline = time.monotonic() + 5
    while not app.r.exists(slack_message_key(case_id)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert app.r.hget(slack_message_key(case_id), "ts") == app.posted_ts(post).encode()
    app.idle()  # the click's work has finished: nothing more to come from it
    assert app.fake.calls("chat.postEphemeral") == []
