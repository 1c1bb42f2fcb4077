"""`/lockguard scan` in Slack shows a deadlock planted with Redisson's exact fair-lock layout: the
findings message names the verdict, every lock and holder of the cycle in order and the rule that
chose the lock proposed; the case offers that one lock only (the message's case line). Every
message is checked against Block Kit's limits (`check_message`)."""

from __future__ import annotations

import pytest
import redis

from bot import serve
from tests.evidence.test_deadlock import A, B, C, hold, queue
from tests.evidence.test_evidence_slack import served
from tests.slack_app_harness import ALERTS, SECRET, blocks_text
from tests.slack_mock import FakeSlack
from tests.slack_requests import slash_command

__all__ = ["served"]  # the fixture, taken from the evidence tests

pytestmark = pytest.mark.real


def test_the_findings_message_names_the_cycle_and_the_lock_proposed(
    served: tuple[serve.Served, FakeSlack], real_redis: redis.Redis
) -> None:
    app, fake = served
    hold(real_redis, b"lock:a", A)
    hold(real_redis, b"lock:b", B)
    queue(real_redis, b"lock:a", B)
    queue(real_redis, b"lock:b", A, C)
    url = app.url + "/slack/events"
    assert slash_command(url, SECRET, text="scan", channel_id=ALERTS).status == 200
    shown = blocks_text(fake.wait_for("chat.postMessage", 1)[0])
    assert "deadlock" in shown
    assert f"lock:b (held by {B.decode()}) waits for lock:a (held by {A.decode()})" in shown
    assert "proposed: its queue has the most waiters of the cycle (2 queued)" in shown
    assert "*Locks flagged*\\n1 (1 deadlock)" in shown  # one finding for the cycle
    assert "2 waiting" in shown
    assert "1 lock would be released" in shown  # the case offers the proposed lock only
