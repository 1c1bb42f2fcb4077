"""Resilience through Slack's protocol: Slack's 429s and 5xx retried, a case whose message Slack
did not take kept in Redis and posted when Slack answers again (also after a restart), and
Slack's redeliveries (`X-Slack-Retry-Num`) acked and ignored.

The app runs as `lockguard serve` does (HTTP mode) on a real redis-server; requests are signed
and sent over HTTP; FakeSlack records what the app sends (see tests/slack_app_harness.py).
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Callable

import pytest
from slack_sdk.http_retry import HttpRequest, HttpResponse, RetryState

from bot import cli
from bot.slack.blocks import ids
from bot.slack.chat import (
    MAX_RETRIES,
    BoundedRateLimitRetry,
    ServerErrorRetry,
    retry_handlers,
)
from bot.store.keyspace import CASES, SLACK_UNPOSTED, case_key, slack_message_key
from tests.slack_app_harness import ALERTS, SECRET, Factory, SlackAppHarness, blocks_text, buttons
from tests.slack_app_harness import slack_app as slack_app  # the fixture
from tests.slack_mock import Call
from tests.slack_requests import DEFAULT_CHANNEL, REDELIVERY, send_signed, slash_command_body

LIVE = {"LOCKGUARD_DRY_RUN": "false"}


def arrivals(app: SlackAppHarness, method: str, n: int, timeout: float = 8.0) -> list[float]:
    """When (time.monotonic) each of the first `n` calls of `method` was first seen."""
    seen: list[float] = []
    deadline = time.monotonic() + timeout
    while len(seen) < n:
        got = len(app.fake.calls(method))
        seen += [time.monotonic()] * max(0, min(got, n) - len(seen))
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(seen)} of {n} {method}; got {app.fake.summary()}")
        time.sleep(0.01)
    return seen


def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.02)


def scan_unposted(app: SlackAppHarness) -> tuple[str, str]:
    """/lockguard scan while Slack does not take the message: the case id, and what the person
    who typed it was told."""
    app.plant(b"lock:stuck")
    assert app.slash("scan", response_url=app.fake.response_url("scan")).status == 200
    told = app.fake.wait_for("response_url", timeout=10)[0].body
    assert told["response_type"] == "ephemeral"
    [case_id] = [k.decode() for k in app.r.zrange(CASES, 0, -1)]
    return case_id, told["text"]


def case_posts(app: SlackAppHarness, case_id: str) -> list[Call]:
    return [
        c
        for c in app.fake.calls("chat.postMessage")
        if c.response.get("ok") and buttons(c).get(ids.APPROVE) == case_id
    ]


def approve_and_check_update(app: SlackAppHarness, case_id: str, post: Call) -> None:
    ts = str(post.response["ts"])
    assert app.click(ids.APPROVE, case_id, message_ts=ts).status == 200
    update = app.fake.wait_for("chat.update")[0]
    assert (update.body["channel"], update.body["ts"]) == (ALERTS, ts)
    assert "Released" in update.body["text"]
    assert app.r.exists(b"lock:stuck") == 0


# -- Slack's 429s and 5xx are retried, after the ack --------------------------------------------


def test_a_429_is_waited_out_and_the_findings_are_posted(slack_app: Factory) -> None:
    app = slack_app()
    app.plant()
    app.fake.rate_limit("chat.postMessage", retry_after=1, times=1)
    started = time.monotonic()
    reply = app.slash("scan")
    assert reply.status == 200
    assert time.monotonic() - started < 1.0  # the ack does not wait for Slack's Retry-After
    first, second = arrivals(app, "chat.postMessage", 2)
    assert 0.9 <= second - first <= 3.0  # Retry-After (1 s) + up to 1 s of jitter
    limited, posted = app.fake.calls("chat.postMessage")
    assert (limited.status, posted.status) == (429, 200)
    assert posted.body == limited.body
    assert buttons(posted)[ids.APPROVE].startswith("LG-")
    assert app.unposted() == {}


def test_a_429_asking_for_too_long_fails_at_once_and_the_case_waits(slack_app: Factory) -> None:
    app = slack_app()
    app.fake.rate_limit("chat.postMessage", retry_after=120, times=1)
    case_id, told = scan_unposted(app)
    assert len(app.fake.calls("chat.postMessage")) == 1  # no two-minute sleep in a worker
    assert "ratelimited" in told
    assert case_id.encode() in app.unposted()
    app.served.slack.reposter.run_once(wait=True)
    assert len(case_posts(app, case_id)) == 1


def test_a_503_on_chat_update_is_retried(slack_app: Factory) -> None:
    app = slack_app(**LIVE)
    app.plant()
    case_id, post = app.scan()
    app.fake.fail("chat.update", error="service_unavailable", status=503, times=1)
    assert app.click(ids.APPROVE, case_id, message_ts=app.posted_ts(post)).status == 200
    failed, updated = app.fake.wait_for("chat.update", 2)
    assert (failed.status, updated.status) == (503, 200)
    assert "Released" in updated.body["text"]
    assert updated.body["ts"] == app.posted_ts(post)


def test_a_429_on_views_open_is_not_slept_on_bolts_thread(slack_app: Factory) -> None:
    app = slack_app()
    app.plant()
    case_id, _ = app.scan()
    app.fake.rate_limit("views.open", retry_after=1, times=1)
    started = time.monotonic()
    assert app.click(ids.REJECT, case_id).status == 200
    told = app.fake.wait_for("chat.postEphemeral")[0]
    assert time.monotonic() - started < 0.9
    assert "click Reject again" in told.body["text"]
    assert len(app.fake.calls("views.open")) == 1


@pytest.mark.parametrize(
    ("status", "retried"),
    [(500, True), (502, True), (503, True), (504, True), (400, False), (404, False)],
)
def test_server_errors_are_retried_and_client_errors_are_not(status: int, retried: bool) -> None:
    [server] = [h for h in retry_handlers() if isinstance(h, ServerErrorRetry)]
    response = HttpResponse(status_code=status, headers={})
    assert server.can_retry(state=RetryState(), request=_request(), response=response) is retried


def test_a_dropped_connection_is_retried_a_bounded_number_of_times() -> None:
    handlers = retry_handlers()
    assert any(
        h.can_retry(state=RetryState(), request=_request(), error=ConnectionResetError())
        for h in handlers
    )
    assert all(h.max_retry_count <= MAX_RETRIES for h in handlers)
    spent = RetryState(current_attempt=MAX_RETRIES)
    assert not any(
        h.can_retry(state=spent, request=_request(), error=ConnectionResetError()) for h in handlers
    )


@pytest.mark.parametrize(
    ("retry_after", "retried"), [("1", True), ("30", True), ("31", False), ("3600", False)]
)
def test_a_429_is_retried_only_for_a_bearable_wait(retry_after: str, retried: bool) -> None:
    [limit] = [h for h in retry_handlers() if isinstance(h, BoundedRateLimitRetry)]
    response = HttpResponse(status_code=429, headers={"Retry-After": retry_after})
    assert limit.can_retry(state=RetryState(), request=_request(), response=response) is retried


def _request() -> HttpRequest:
    return HttpRequest(method="POST", url="http://127.0.0.1/api/chat.postMessage", headers={})


# -- Slack down: the case waits in Redis, its message comes when Slack answers -------------------


def test_slack_down_keeps_the_case_and_its_message_is_posted_when_slack_answers(
    slack_app: Factory,
) -> None:
    app = slack_app(**LIVE)
    app.fake.fail("chat.postMessage", error="fatal_error", status=500, times=None)
    case_id, told = scan_unposted(app)
    assert "fatal_error" in told
    assert f"Case `{case_id}` waits in Redis" in told
    assert "as soon as Slack takes messages again" in told
    assert len(app.fake.calls("chat.postMessage")) == 3  # the post and its two retries
    assert app.r.hget(case_key(case_id), "state") == b"pending"
    entry = app.unposted()[case_id.encode()]
    assert entry.startswith(ALERTS.encode() + b"|")

    app.served.slack.reposter.run_once(wait=True)  # Slack still down: the entry stays
    assert case_posts(app, case_id) == []
    assert app.unposted()[case_id.encode()].split(b"|")[2] == b"1"  # one attempt counted

    app.fake.clear_faults()
    app.served.slack.reposter.run_once(wait=True)
    [post] = case_posts(app, case_id)
    assert post.body["channel"] == ALERTS
    assert buttons(post) == {ids.APPROVE: case_id, ids.REJECT: case_id}
    assert "Posted late" in blocks_text(post)
    assert "lock:stuck" in blocks_text(post)
    assert app.unposted() == {}
    assert app.r.hget(slack_message_key(case_id), "ts") == post.response["ts"].encode()
    approve_and_check_update(app, case_id, post)


def timer_rounds(app: SlackAppHarness, monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """How many rounds the reposter's timer thread has finished so far (its `_loop` looks up
    `run_once` on the instance each time, so the count starts with the next round)."""
    reposter = app.served.slack.reposter
    run_once = reposter.run_once
    finished: list[None] = []

    def counted(*, wait: bool = False) -> int:
        try:
            return run_once(wait=wait)
        finally:
            if threading.current_thread().name == "lockguard-reposter":
                finished.append(None)

    monkeypatch.setattr(reposter, "run_once", counted)
    return lambda: len(finished)


def test_the_timer_posts_the_waiting_case_by_itself(
    slack_app: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = slack_app(repost_every=0.2)
    rounds = timer_rounds(app, monkeypatch)
    app.fake.fail("chat.postMessage", error="internal_error", status=503, times=None)
    case_id, _ = scan_unposted(app)
    app.fake.clear_faults()
    eventually(lambda: bool(case_posts(app, case_id)), timeout=10)
    # Later rounds find nothing left to post. Three more rounds of the timer: the one that
    # posted may be the first to finish, and one may be skipped while the round the post's
    # success started (`poke`, at most one per MIN_GAP) runs; at least one full round is left.
    seen = rounds()
    eventually(lambda: rounds() >= seen + 3, timeout=10)
    assert len(case_posts(app, case_id)) == 1
    assert app.unposted() == {}


def test_the_next_message_slack_takes_brings_the_waiting_case_out(slack_app: Factory) -> None:
    app = slack_app(repost_every=3600)
    app.fake.fail("chat.postMessage", error="fatal_error", status=500, times=3)
    case_id, _ = scan_unposted(app)
    assert app.slash("scan lock:nothing:*").status == 200
    app.fake.wait_for("chat.postMessage", 5)  # 3 refused, the "all healthy", then the case
    [post] = case_posts(app, case_id)
    assert post.body["channel"] == ALERTS


def test_an_unposted_case_survives_a_restart_and_its_buttons_work(slack_app: Factory) -> None:
    first = slack_app(**LIVE)
    first.fake.fail("chat.postMessage", error="fatal_error", status=500, times=None)
    case_id, _ = scan_unposted(first)
    first.served.stop()
    first.fake.clear_faults()
    second = slack_app(**LIVE)  # its reposter's first round runs at start
    [post] = second.fake.wait_for("chat.postMessage", 4)[3:]
    assert buttons(post)[ids.APPROVE] == case_id
    eventually(lambda: second.unposted() == {})
    approve_and_check_update(second, case_id, post)


def test_a_case_decided_meanwhile_or_gone_is_dropped_not_posted(
    slack_app: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = slack_app(repost_every=3600)
    app.fake.fail("chat.postMessage", error="fatal_error", status=500, times=None)
    case_id, _ = scan_unposted(app)
    for name, value in {
        "REDIS_HOST": "127.0.0.1",
        "LOCKGUARD_LOCK_PATTERNS": "lock:*",
        "REDIS_PORT": str(app.r.connection_pool.connection_kwargs["port"]),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(os.path.dirname(__file__))  # no stray .env
    assert cli.main(["reject", case_id, "--by", "ann", "--reason", "known"], out=io.StringIO()) == 0
    app.r.hset(SLACK_UNPOSTED, "LG-250101-abcdef", f"{DEFAULT_CHANNEL}|1|0|0|")  # no such case
    app.fake.clear_faults()
    before = len(app.fake.calls("chat.postMessage"))
    assert app.served.slack.reposter.run_once(wait=True) == 0
    assert len(app.fake.calls("chat.postMessage")) == before
    assert app.unposted() == {}


def test_two_replicas_post_a_waiting_case_once(slack_app: Factory) -> None:
    one = slack_app(repost_every=3600)
    one.fake.fail("chat.postMessage", error="fatal_error", status=500, times=None)
    case_id, _ = scan_unposted(one)
    two = slack_app(repost_every=3600)
    one.fake.clear_faults()
    go = threading.Barrier(2)

    def round_of(app: SlackAppHarness) -> None:
        go.wait()
        app.served.slack.reposter.run_once(wait=True)

    threads = [threading.Thread(target=round_of, args=(a,)) for a in (one, two)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(case_posts(one, case_id)) == 1
    assert one.unposted() == {}


def test_not_in_channel_waits_for_the_app_to_be_invited(slack_app: Factory) -> None:
    app = slack_app(repost_every=3600)
    app.fake.fail("chat.postMessage", error="not_in_channel", times=2)
    case_id, told = scan_unposted(app)
    assert "not_in_channel" in told
    assert "once the app is in this channel" in told
    app.served.slack.reposter.run_once(wait=True)  # still not invited
    assert case_posts(app, case_id) == []
    app.served.slack.reposter.run_once(wait=True)  # invited now
    assert len(case_posts(app, case_id)) == 1


# -- Slack's redeliveries never run anything twice ----------------------------------------------


def test_a_redelivered_slash_command_starts_no_second_scan(slack_app: Factory) -> None:
    app = slack_app()
    app.plant()
    body = slash_command_body(text="scan", channel_id=ALERTS)
    ts = int(time.time())
    assert send_signed(app.url, SECRET, body, timestamp=ts).status == 200
    again = send_signed(app.url, SECRET, body, timestamp=ts, headers=REDELIVERY)
    assert (again.status, again.body) == (200, b"")
    assert again.headers.get("x-slack-no-retry") == "1"
    app.fake.wait_for("chat.postMessage")
    app.settle()
    assert len(app.fake.calls("chat.postMessage")) == 1
    assert app.r.zcard(CASES) == 1
    assert app.slash("scan", bad_signature=True, headers=REDELIVERY).status == 401


def test_a_redelivered_click_or_submission_changes_nothing(slack_app: Factory) -> None:
    app = slack_app(**LIVE)
    token = app.plant()
    case_id, post = app.scan()
    ts = app.posted_ts(post)
    assert app.click(ids.APPROVE, case_id, message_ts=ts, headers=REDELIVERY).status == 200
    assert app.submit_reject(case_id, "no", headers=REDELIVERY).status == 200
    app.settle()
    assert app.r.get(b"lock:stuck") == token
    assert app.r.hget(case_key(case_id), "state") == b"pending"
    assert {c.method for c in app.calls_but_settling()} == {"auth.test", "chat.postMessage"}
    approve_and_check_update(app, case_id, post)  # the first delivery still works
