"""The Slack app through Slack's protocol: `/lockguard` commands and the findings they post.

The app runs as `lockguard serve` does (HTTP mode) on a real redis-server; requests are signed
and sent over HTTP; FakeSlack records what the app sends (see tests/slack_app_harness.py).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from bot.slack.blocks import ids
from tests.slack.test_slack_app_case_size import attached
from tests.slack_app_harness import ALERTS, Factory, blocks_text, buttons
from tests.slack_app_harness import slack_app as slack_app


def blocks_text_of(body: dict[str, Any]) -> str:
    return json.dumps(body.get("blocks"), ensure_ascii=False)


def test_scan_acks_at_once_then_posts_findings_with_buttons_in_the_lockguard_channel(
    slack_app: Factory,
) -> None:
    app = slack_app()
    app.plant(b"lock:stuck")
    started = time.monotonic()
    reply = app.slash("scan", channel_id=ALERTS)
    assert reply.status == 200
    assert time.monotonic() - started < 2.0
    assert reply.text.startswith("Scanning")  # Bolt sends a text-only ack as plain text
    post = app.fake.wait_for("chat.postMessage")[0]
    assert post.body["channel"] == ALERTS  # LOCKGUARD_SLACK_CHANNEL: cases are decided there
    assert post.token == "xoxb-lockguard-test-token"
    found = buttons(post)
    case_id = found[ids.APPROVE]
    assert case_id.startswith("LG-")
    assert found == {ids.APPROVE: case_id, ids.REJECT: case_id}  # only the case id
    shown = blocks_text(post)
    assert "lock:stuck" in shown
    assert "Dry run" in shown  # LOCKGUARD_DRY_RUN defaults to true
    assert "Any member of this channel may decide" in shown


def test_a_hostile_key_is_shown_inert(slack_app: Factory) -> None:
    app = slack_app()
    app.plant(b"lock:<!channel> <@U0BOSS> *bold* <https://evil.example|click>")
    _, post = app.scan()
    shown = blocks_text(post)
    assert "<!channel>" not in shown
    assert "<@U0BOSS>" not in shown
    assert "<https://" not in shown
    assert "&lt;!channel&gt;" in shown
    assert "<!channel>" not in post.body["text"]


def test_all_healthy_is_posted_when_nothing_is_flagged(slack_app: Factory) -> None:
    app = slack_app()
    app.r.set(b"lock:fresh", b"token", px=60_000)
    reply = app.slash("scan")
    assert reply.status == 200
    post = app.fake.wait_for("chat.postMessage")[0]
    assert post.body["channel"] == ALERTS
    assert "all healthy" in post.body["text"]
    assert buttons(post) == {}


@pytest.mark.parametrize("text", ["help", "", "frobnicate", "HELP me"])
def test_help_and_anything_unknown_get_the_help_in_the_ack(slack_app: Factory, text: str) -> None:
    app = slack_app()
    reply = app.slash(text)
    assert reply.status == 200
    body = reply.json()
    assert "scan [pattern]" in body["text"]
    assert any(b["type"] == "header" for b in body["blocks"])
    app.settle()
    assert app.fake.calls("chat.postMessage") == []


def test_status_and_cases_answer_through_the_response_url(slack_app: Factory) -> None:
    app = slack_app()
    app.plant()
    case_id, _ = app.scan()
    assert app.slash("status", response_url=app.fake.response_url("status")).status == 200
    assert app.slash("cases", response_url=app.fake.response_url("cases")).status == 200
    answers = {c.target: c.body for c in app.fake.wait_for("response_url", 2)}
    status, cases = answers["status"], answers["cases"]
    assert status["response_type"] == "ephemeral"
    assert "lockguard status" in status["text"]
    assert "redis://127.0.0.1" in blocks_text_of(status)
    assert case_id in blocks_text_of(cases)
    assert "Waiting for a decision" in blocks_text_of(cases)


def test_a_bad_signature_or_a_stale_timestamp_gets_401_and_nothing_runs(slack_app: Factory) -> None:
    app = slack_app()
    app.plant()
    assert app.slash("scan", bad_signature=True).status == 401
    assert app.slash("scan", stale=True).status == 401
    assert app.click(ids.APPROVE, "LG-250101-abcdef", bad_signature=True).status == 401
    app.settle()
    assert {c.method for c in app.calls_but_settling()} == {"auth.test"}
    assert app.r.get(b"{lockguard}:scan:last") is None  # no scan ran


def test_a_scan_with_a_pattern_scans_only_it(slack_app: Factory) -> None:
    app = slack_app()
    app.plant(b"lock:billing:1")
    app.plant(b"lock:other:1")
    _, post = app.scan("lock:billing:*")
    shown = blocks_text(post)
    assert "lock:billing:1" in shown
    assert "lock:other:1" not in shown


def test_a_bad_pattern_is_answered_to_the_person_only(slack_app: Factory) -> None:
    app = slack_app()
    reply = app.slash("scan {lockguard}:*", response_url=app.fake.response_url("bad"))
    assert reply.status == 200
    assert "would also match lockguard's own keys" in reply.text  # in the ack: only they see it
    assert "Traceback" not in reply.text
    app.settle()
    assert app.calls_but_settling("response_url") == []
    assert app.fake.calls("chat.postMessage") == []  # no alert: a person's typo


def test_posting_refused_by_slack_is_told_to_the_person(slack_app: Factory) -> None:
    app = slack_app()
    app.plant()
    app.fake.fail("chat.postMessage", "not_in_channel")
    app.slash("scan", response_url=app.fake.response_url("scan"))
    answer = app.fake.wait_for("response_url")[0].body
    assert "not_in_channel" in answer["text"]
    assert "waits in Redis" in answer["text"]


def test_many_findings_give_valid_messages_and_every_key_is_visible(slack_app: Factory) -> None:
    app = slack_app()
    keys = [f"lock:bulk:{i:03d}".encode() for i in range(200)]
    for k in keys:
        app.plant(k)
    case_id, post = app.scan()
    assert case_id
    rows = attached(app, case_id, app.posted_ts(post))  # the case's list, in the thread
    assert sorted(r["key"].encode() for r in rows) == keys
    assert [c for c in app.fake.calls("chat.postMessage") if c.body.get("thread_ts")] == []
    assert app.fake.hook_errors == []
    assert {c.body["channel"] for c in app.fake.calls("chat.postMessage")} == {ALERTS}
