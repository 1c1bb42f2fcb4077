"""`/lockguard scan` in Slack shows a deadlock planted with Redisson's exact fair-lock layout: the
findings message names the verdict, every lock and holder of the cycle in order and the rule that
chose the lock proposed; the case offers that one lock only (the message's case line). Every
message is checked against Block Kit's limits (`check_message`)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import redis

from bot import serve
from bot.core.model import Finding, Layout, Reason
from bot.scan.result import ScanResult
from bot.slack.blocks.findings import findings_message
from tests.block_kit import check_message
from tests.evidence.test_deadlock import A, B, C, hold, queue
from tests.evidence.test_evidence_slack import served
from tests.slack_app_harness import ALERTS, SECRET, blocks_text
from tests.slack_mock import FakeSlack
from tests.slack_requests import slash_command

__all__ = ["served"]  # the fixture, taken from the evidence tests


@pytest.mark.real
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


def test_hostile_keys_in_a_cycle_stay_plain_text_within_block_kit_limits() -> None:
    """Keys are the users' bytes: Slack markup and control bytes in a cycle's locks are shown
    escaped, never as a mention or a link, and a long cycle stays within Block Kit's limits."""
    hostile = b"lock:<!channel>\x00" + b"x" * 3000
    cycle = ((hostile, A), *((b"lock:<@U123>%d" % i, B) for i in range(40)))
    f = Finding(
        key=hostile,
        type="hash",
        layout=Layout.REDISSON,
        reason=Reason.DEADLOCK,
        identity=b"x",
        owner="client u thread 1",
        ttl_ms=30_000,
        held_seconds=5.0,
        idle_seconds=1,
        observations=1,
        rearms=0,
        counter=None,
        observed_ms=1_796_000_000_000,
        releasable=True,
        note="proposed: its queue has the most waiters of the cycle (2 queued)",
        cycle=cycle,
    )
    result = ScanResult(scanned=41, by_reason=Counter({Reason.DEADLOCK: 1}), worst=[f])
    post = findings_message(
        result,
        None,
        endpoint="127.0.0.1:6379",
        dry_run=True,
        auto_remediate=True,
        approvers_note="",
    )
    check_message(post.message)
    shown = json.dumps(post.message, ensure_ascii=False)
    assert "<!channel>" not in shown
    assert "<@U123>" not in shown
    assert "&lt;!channel&gt;" in shown
    assert "… 33 more waits for" in shown
