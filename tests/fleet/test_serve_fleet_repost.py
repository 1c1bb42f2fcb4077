"""On a fleet, a case message Slack did not take waits in its own target's Redis
(`CasePosts.unposted`), and the one `Reposter` posts it once Slack takes messages again, for
every target, not only the Slack app's own (it once drained the first target's queue alone:
the other targets' cases expired unseen).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from bot import serve
from bot.slack.blocks import ids
from bot.store.keyspace import SLACK_UNPOSTED
from tests.block_kit import check_message
from tests.fleet.test_serve_fleet import clients as clients
from tests.fleet.test_serve_fleet import served as served  # the fixtures
from tests.fleet.test_serve_fleet_slack import plant
from tests.ops.test_ops_serve import wait_until
from tests.slack_app_harness import buttons
from tests.slack_mock import FakeSlack


def test_a_non_first_targets_unposted_case_message_is_reposted(
    clients: dict[str, redis.Redis], slack_fake: FakeSlack, served: Callable[..., serve.Served]
) -> None:
    served(repost_every=0.5, LOCKGUARD_DRY_RUN="false")
    queue = clients["queue"]
    refused: list[bool] = []

    def on_message(body: dict[str, Any]) -> object:
        if body.get("channel") == "C0QUEUE" and not refused:
            refused.append(True)
            return "not_in_channel"  # Slack refuses the queue's first findings message
        return check_message(body)

    slack_fake.on_message = on_message
    plant(queue, b"lock:stuck")
    wait_until(lambda: bool(queue.hgetall(SLACK_UNPOSTED)), 10)
    [case_id] = [k.decode() for k in queue.hkeys(SLACK_UNPOSTED)]

    def reposted() -> bool:
        return any(
            c.body.get("channel") == "C0QUEUE"
            and c.response.get("ok")
            and buttons(c).get(ids.APPROVE) == case_id
            for c in slack_fake.calls("chat.postMessage")
        )

    wait_until(reposted, 15)  # the reposter runs every 0.5 s here
