"""`/lockguard scan` in Slack lists the flagged locks worst by impact first and says the impact in
words: the Redisson lock five clients wait behind above an older lock nobody waits for, and a
BullMQ job lock whose queue has work piling up and no worker connected."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from bot import serve
from bot.config import load_settings
from tests.block_kit import check_message
from tests.conftest import RedisServer
from tests.evidence.test_evidence import plant_bull, plant_redisson, subscribe, worker_connection
from tests.slack_app_harness import ALERTS, SECRET, base_env, blocks_text
from tests.slack_fixtures import drop_proxy_settings
from tests.slack_mock import FakeSlack
from tests.slack_requests import slash_command

pytestmark = pytest.mark.real


@pytest.fixture
def served(
    monkeypatch: pytest.MonkeyPatch, redis_server: RedisServer, real_redis: redis.Redis
) -> Iterator[tuple[serve.Served, FakeSlack]]:
    drop_proxy_settings(monkeypatch)
    fake = FakeSlack(on_message=check_message).start()
    env = {**base_env(redis_server.port, fake), "LOCKGUARD_LOCK_PATTERNS": "lock:*,bull:*:lock"}
    app = serve.start(load_settings(env=env), port=0, err=io.StringIO())
    try:
        yield app, fake
    finally:
        app.stop()
        fake.stop()
    assert fake.hook_errors == []


def test_the_findings_message_lists_worst_impact_first_in_words(
    served: tuple[serve.Served, FakeSlack], redis_server: RedisServer, real_redis: redis.Redis
) -> None:
    app, fake = served
    others: list[Any] = []
    try:
        real_redis.set(b"lock:old", b"tok")  # no waiters, Redis cannot tell
        plant_redisson(real_redis, b"lock:settle")
        subscribe(redis_server, others, b"redisson_lock__channel:{lock:settle}", 5)
        plant_bull(real_redis, b"emails", 7, wait=3, paused=1, prio=0)
        worker_connection(redis_server, others, b"bull:" + base64.b64encode(b"other"))
        url = app.url + "/slack/events"
        assert slash_command(url, SECRET, text="scan", channel_id=ALERTS).status == 200
        post = fake.wait_for("chat.postMessage", 1)[0]
    finally:
        for c in others:
            c.close()
    shown = blocks_text(post)
    assert "5 waiting" in shown
    assert "5 waiting · releasing wakes 5 waiters" in shown
    assert "4 queued · owner gone: no worker connected to queue `emails`" in shown
    settle, bull, old = (shown.index(k) for k in ("lock:settle", "bull:emails:7:lock", "lock:old"))
    assert old > max(settle, bull)  # the lock nobody waits for comes last
