"""The Slack app end to end on locks made by real libraries in SIGKILLed children: `/lockguard
scan` posts them with working buttons, Approve releases exactly the abandoned ones (one reclaim
event each), and a live, renewing lock beside them is never touched."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
import redis

from bot import serve
from bot.compose import build_engine
from bot.config import load_settings
from bot.core.rules import Policy
from bot.slack.blocks import ids
from tests.block_kit import check_message
from tests.cases.test_reclaim import Listener
from tests.conftest import RedisServer
from tests.scan.test_real_libraries import PAST, THRESHOLD_MS, holder, kill
from tests.slack_app_harness import ALERTS, SECRET, base_env, blocks_text, buttons
from tests.slack_fixtures import drop_proxy_settings
from tests.slack_mock import FakeSlack
from tests.slack_requests import block_action, slash_command

pytestmark = pytest.mark.real


@pytest.fixture
def served(
    monkeypatch: pytest.MonkeyPatch, redis_server: RedisServer, real_redis: redis.Redis
) -> Iterator[tuple[serve.Served, FakeSlack]]:
    """`lockguard serve` with a 1.5 s threshold (the settings allow 30 s at least: the engine is
    built from them, then given the short policy), live (not dry run)."""
    drop_proxy_settings(monkeypatch)
    fake = FakeSlack(on_message=check_message).start()
    settings = load_settings(
        env={
            **base_env(redis_server.port, fake),
            "LOCKGUARD_DRY_RUN": "false",
            "LOCKGUARD_APPROVERS": "U0ALICE",
        }
    )
    engine = build_engine(settings)
    policy = Policy(stale_threshold_ms=THRESHOLD_MS)
    engine.options = replace(engine.options, policy=policy)
    engine.config = replace(engine.config, policy=policy)
    app = serve.start(settings, engine=engine, port=0, err=io.StringIO())
    try:
        yield app, fake
    finally:
        app.stop()
        fake.stop()
    assert fake.hook_errors == []


def test_abandoned_locks_of_real_libraries_are_released_from_slack_and_a_live_one_is_not(
    served: tuple[serve.Served, FakeSlack], real_redis: redis.Redis
) -> None:
    app, fake = served
    url = app.url + "/slack/events"
    port = real_redis.connection_pool.connection_kwargs["port"]
    events = Listener(real_redis)
    with (
        holder(port, "redis-py", "lock:report") as a,
        holder(port, "python-redis-lock", "billing") as b,
        holder(port, "python-redis-lock", "live", expire=2, renew=True),
    ):
        kill(a)
        kill(b)
        live_token = real_redis.get(b"lock:live")
        # Two scans past the threshold apart: the first starts the leases, the second finds
        # both abandoned locks held past it.
        assert slash_command(url, SECRET, text="scan", channel_id=ALERTS).status == 200
        fake.wait_for("chat.postMessage", 1)
        time.sleep(PAST)
        before = len(fake.calls("chat.postMessage"))
        assert slash_command(url, SECRET, text="scan", channel_id=ALERTS).status == 200
        post = fake.wait_for("chat.postMessage", before + 1)[before]
        shown = blocks_text(post)
        assert "lock:report" in shown
        assert "lock:billing" in shown
        case_id = buttons(post)[ids.APPROVE]
        reply = block_action(
            url,
            SECRET,
            action_id=ids.APPROVE,
            value=case_id,
            user_id="U0ALICE",
            channel_id=ALERTS,
            message_ts=str(post.response["ts"]),
        )
        assert reply.status == 200
        deadline = time.monotonic() + 10
        while real_redis.exists(b"lock:report", b"lock:billing") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert real_redis.exists(b"lock:report", b"lock:billing") == 0
        # the release has ended (its message says Released) before the live lock is looked at
        fake.wait_for(
            "chat.update", where=lambda c: "Released" in str(c.body.get("text")), timeout=10
        )
        assert real_redis.get(b"lock:live") == live_token  # the renewing owner still holds it
    released = sorted(e["key"] for e in events.rest())
    assert released == ["lock:billing", "lock:report"]  # one event each
    updates = [c for c in fake.calls("chat.update") if "Released" in str(c.body.get("text"))]
    assert updates


def test_the_approver_is_told_which_renewal_was_missed_or_that_none_comes_by_itself(
    served: tuple[serve.Served, FakeSlack], real_redis: redis.Redis
) -> None:
    """A killed python-redis-lock with auto-renewal (expire=60) whose TTL has fallen below a
    third of its lease (the PEXPIRE stands for 45 s passing unrenewed), beside a killed redis-py
    lock with a 300 s timeout: the case's message names the missed renewal of the first and says
    the second's library does not renew on its own."""
    app, fake = served
    url = app.url + "/slack/events"
    port = real_redis.connection_pool.connection_kwargs["port"]
    with (
        holder(port, "python-redis-lock", "renewer", expire=60, renew=True) as a,
        holder(port, "redis-py", "lock:plain", expire=300) as b,
    ):
        kill(a)
        kill(b)
        assert slash_command(url, SECRET, text="scan", channel_id=ALERTS).status == 200
        fake.wait_for("chat.postMessage", 1)
        time.sleep(PAST)
        assert real_redis.pexpire(b"lock:renewer", 15_000)
        before = len(fake.calls("chat.postMessage"))
        assert slash_command(url, SECRET, text="scan", channel_id=ALERTS).status == 200
        post = fake.wait_for("chat.postMessage", before + 1)[before]
    shown = blocks_text(post)
    assert ids.APPROVE in buttons(post)
    assert "a live holder would have renewed by " in shown
    assert "(python-redis-lock renews at 2/3 of its lease); none seen since " in shown
    assert "redis_py locks do not renew on their own: the holder may still be working" in shown
