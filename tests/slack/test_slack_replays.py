"""A signed Slack request sent again runs once (`bot.slack.replays`), through Slack's protocol.

The same bytes with the same `X-Slack-Signature` and `X-Slack-Request-Timestamp` are valid for
five minutes to Bolt; lockguard records each in Redis, so a copy sent again (to this replica or
another one on the same Redis) is acked and nothing runs. Slack's own redeliveries keep their
answer (`X-Slack-No-Retry: 1`).
"""

from __future__ import annotations

import json
import time

from bot.slack.blocks import ids
from bot.store.keyspace import CASES, SLACK_SEEN_MS, slack_seen_key
from tests.block_kit import check_message
from tests.slack_app_harness import ALERTS, SECRET, Factory, SlackAppHarness
from tests.slack_app_harness import slack_app as slack_app  # the fixture
from tests.slack_requests import (
    REDELIVERY,
    SlackSigner,
    app_home_opened,
    block_action_payload,
    event_callback_body,
    interactive_body,
    send_signed,
    slash_command_body,
)

LIVE = {"LOCKGUARD_DRY_RUN": "false"}


def scans(app: SlackAppHarness) -> int:
    """How many scans ran: one `scan` entry in the audit log each."""
    return sum(
        1 for _, fields in app.r.xrange(b"{lockguard}:audit") if fields.get(b"event") == b"scan"
    )


def settle(app: SlackAppHarness) -> None:
    """What a replay would have started has shown: a later request has gone through the app and
    every job handed to its worker pool has finished (positive signals, not a sleep)."""
    app.settle()
    app.idle()


def test_a_replayed_slash_command_runs_once_and_a_new_one_runs_again(slack_app: Factory) -> None:
    app = slack_app()
    app.plant()
    body, ts = slash_command_body(text="scan", channel_id=ALERTS), int(time.time())
    first = send_signed(app.url, SECRET, body, timestamp=ts)
    assert first.status == 200
    assert first.text.startswith("Scanning")
    app.fake.wait_for("chat.postMessage")
    again = send_signed(app.url, SECRET, body, timestamp=ts)
    assert (again.status, again.body) == (200, b"")
    settle(app)
    assert len(app.fake.calls("chat.postMessage")) == 1
    assert scans(app) == 1
    assert app.r.zcard(CASES) == 1
    signature = SlackSigner(SECRET).signature(body, ts)
    assert 0 < app.r.pttl(slack_seen_key(signature, str(ts))) <= SLACK_SEEN_MS
    fresh = send_signed(app.url, SECRET, body, timestamp=ts + 1)  # a new request
    assert fresh.text.startswith("Scanning")
    app.fake.wait_for("chat.postMessage", 2)
    assert scans(app) == 2


def test_a_replay_sent_to_another_replica_runs_nothing_there(slack_app: Factory) -> None:
    one, two = slack_app(), slack_app()
    one.plant()
    body, ts = slash_command_body(text="scan", channel_id=ALERTS), int(time.time())
    assert send_signed(one.url, SECRET, body, timestamp=ts).text.startswith("Scanning")
    one.fake.wait_for("chat.postMessage")
    again = send_signed(two.url, SECRET, body, timestamp=ts)
    assert (again.status, again.body) == (200, b"")
    settle(two)
    assert len(one.fake.calls("chat.postMessage")) == 1
    assert scans(one) == 1


def test_a_replayed_click_is_dropped_without_a_word(slack_app: Factory) -> None:
    app = slack_app(**LIVE)
    app.plant()
    case_id, post = app.scan()
    payload = block_action_payload(
        action_id=ids.APPROVE, value=case_id, message_ts=app.posted_ts(post)
    )
    body, ts = interactive_body(payload), int(time.time())
    assert send_signed(app.url, SECRET, body, timestamp=ts).status == 200
    app.fake.wait_for("chat.update")
    again = send_signed(app.url, SECRET, body, timestamp=ts)
    assert (again.status, again.body) == (200, b"")
    settle(app)
    assert app.fake.calls("chat.postEphemeral") == []  # not even "already decided"
    assert app.r.exists(b"lock:stuck") == 0


def test_slacks_own_redeliveries_are_answered_as_before(slack_app: Factory) -> None:
    app = slack_app()
    body = event_callback_body(app_home_opened("U0ALICE"))
    ts = int(time.time())
    first = send_signed(app.url, SECRET, body, content_type="application/json", timestamp=ts)
    assert first.status == 200
    app.fake.wait_for("views.publish")
    for stamp in (ts, ts + 1):  # the same signature again, or signed anew: Slack's retry
        retry = send_signed(
            app.url,
            SECRET,
            body,
            content_type="application/json",
            timestamp=stamp,
            headers=REDELIVERY,
        )
        assert (retry.status, retry.body) == (200, b"")
        assert retry.headers.get("x-slack-no-retry") == "1"
    settle(app)
    assert len(app.fake.calls("views.publish")) == 1


def test_redis_down_a_slash_command_runs_nothing_and_says_why(
    slack_app: Factory, closed_port: int
) -> None:
    app = slack_app(REDIS_PORT=str(closed_port))
    reply = app.slash("scan", response_url=app.fake.response_url("scan"))
    assert reply.status == 200
    answer = reply.json()
    check_message({"text": answer["text"], "blocks": []})
    assert answer["response_type"] == "ephemeral"
    assert "cannot reach Redis at redis://127.0.0.1:" in answer["text"]
    assert "ran nothing" in answer["text"]
    alert = app.fake.wait_for("chat.postMessage")[0]
    assert alert.body["channel"] == ALERTS
    assert "Redis unreachable" in alert.body["text"]
    app.idle()  # (no request can go through the app with Redis down: `settle` cannot)
    assert app.fake.calls("response_url") == []  # no scan started to answer later
    assert "Traceback" not in json.dumps([c.body for c in app.fake.calls()])
