"""The running Slack app, for tests: `lockguard serve` (HTTP mode, port 0) on a real redis-server,
talking to FakeSlack, driven by signed requests over real HTTP.

    app = slack_app(LOCKGUARD_DRY_RUN="false", LOCKGUARD_APPROVERS="U0ALICE")
    app.plant(b"lock:stuck")                  # a redis-py lock taken 2 h ago: releasable now
    case_id, post = app.scan()                # /lockguard scan, then the findings it posted
    app.click(APPROVE, case_id, user_id="U0ALICE")

Every message the app posts, updates or sends ephemerally is checked against Slack's limits
(`tests.block_kit.check_message`) by the fake; a failing check is answered `invalid_blocks`
and kept in `fake.hook_errors`, which the fixture asserts is empty at the end.
"""

from __future__ import annotations

import io
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis

from bot import serve
from bot.config import load_settings
from bot.serve.operations import Tuning
from bot.slack.blocks import ids
from bot.slack.reposter import EVERY as REPOST_EVERY
from bot.slack.work import WORKERS
from bot.store.keyspace import SLACK_UNPOSTED
from tests.cases.test_reclaim import Listener as Events  # noqa: F401 (re-exported: the reclaim events)
from tests.core.test_layouts import uuid1_hex
from tests.slack_fixtures import slack_fake as slack_fake  # the fixture slack_app uses
from tests.slack_mock import Call, FakeSlack
from tests.slack_requests import (
    SlackReply,
    block_action,
    slash_command,
    view_submission,
)

SECRET = "lg-signing-secret-for-tests"
TOKEN = "xoxb-lockguard-test-token"
ALERTS = "C0ALERTS"
TWO_HOURS_MS = 7_200_000


def base_env(redis_port: int, fake: FakeSlack) -> dict[str, str]:
    return {
        "REDIS_HOST": "127.0.0.1",
        "REDIS_PORT": str(redis_port),
        "LOCKGUARD_LOCK_PATTERNS": "lock:*",
        "LOCKGUARD_STALE_THRESHOLD_SECONDS": "30",
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": fake.url,
        "LOCKGUARD_SLACK_CHANNEL": ALERTS,
        "LOCKGUARD_HTTP_HOST": "127.0.0.1",
        # serve refuses to start with nobody named to approve; the tests that are about who may
        # decide name them (`slack_app(LOCKGUARD_APPROVERS=...)`, `..._APPROVER_GROUP=...`).
        "LOCKGUARD_APPROVERS": "*",
        # No job fires on its own in the middle of a test; the tests of the schedules set them.
        "LOCKGUARD_SCAN_SCHEDULE": "off",
        "LOCKGUARD_DIGEST_SCHEDULE": "off",
    }


def with_env(base: dict[str, str], env: dict[str, str]) -> dict[str, str]:
    """`env` on top of `base`; a test naming an approver group approves by that group alone
    (base_env's `LOCKGUARD_APPROVERS=*` cannot go with a group)."""
    out = {**base, **env}
    if "LOCKGUARD_APPROVER_GROUP" in env and "LOCKGUARD_APPROVERS" not in env:
        out.pop("LOCKGUARD_APPROVERS", None)
    return out


def buttons(call: Call) -> dict[str, str]:
    """action_id -> value of every button in a posted or updated message."""
    out = {}
    for block in call.body.get("blocks") or []:
        for el in block.get("elements", []) if block.get("type") == "actions" else []:
            out[el["action_id"]] = el["value"]
    return out


def blocks_text(call: Call) -> str:
    return json.dumps(call.body.get("blocks") or [], ensure_ascii=False)


@dataclass
class SlackAppHarness:
    fake: FakeSlack
    served: serve.Served
    r: redis.Redis
    log: io.StringIO = field(default_factory=io.StringIO)

    @property
    def url(self) -> str:
        return self.served.url + "/slack/events"

    def plant(self, key: bytes = b"lock:stuck", age_ms: int = TWO_HOURS_MS) -> bytes:
        """A redis-py lock with no TTL whose uuid1 token says it was taken `age_ms` ago."""
        seconds, micros = self.r.time()
        now_ms = int(seconds) * 1000 + int(micros) // 1000  # not whole seconds: a lock planted
        # 27 s old must still read as 27 s a moment later, not 28 s when the second turns
        token = uuid1_hex(now_ms - age_ms)
        self.r.set(key, token)
        return token

    def slash(self, text: str = "", **kw: Any) -> SlackReply:
        """`/lockguard text`, typed in LOCKGUARD_SLACK_CHANNEL unless `channel_id` says."""
        kw.setdefault("channel_id", ALERTS)
        return slash_command(self.url, SECRET, text=text, **kw)

    def click(self, action_id: str, value: str, **kw: Any) -> SlackReply:
        """A button clicked on a message in LOCKGUARD_SLACK_CHANNEL unless `channel_id` says."""
        kw.setdefault("channel_id", ALERTS)
        return block_action(self.url, SECRET, action_id=action_id, value=value, **kw)

    def submit_reject(self, case_id: str, reason: str, **kw: Any) -> SlackReply:
        values = {
            ids.REJECT_REASON_BLOCK: {
                ids.REJECT_REASON_ACTION: {"type": "plain_text_input", "value": reason}
            }
        }
        return view_submission(
            self.url,
            SECRET,
            callback_id=ids.REJECT_MODAL,
            private_metadata=case_id,
            values=values,
            **kw,
        )

    def submit_approve(self, case_id: str, typed: str, **kw: Any) -> SlackReply:
        """The approve modal of a big case submitted with `typed` as the number of locks."""
        values = {
            ids.APPROVE_COUNT_BLOCK: {
                ids.APPROVE_COUNT_ACTION: {"type": "plain_text_input", "value": typed}
            }
        }
        return view_submission(
            self.url,
            SECRET,
            callback_id=ids.APPROVE_MODAL,
            private_metadata=case_id,
            values=values,
            **kw,
        )

    def scan(self, pattern: str = "", **kw: Any) -> tuple[str, Call]:
        """/lockguard scan; the findings message it posted and the case id its buttons carry."""
        before = len(self.fake.calls("chat.postMessage"))
        reply = self.slash(f"scan {pattern}".strip(), **kw)
        assert reply.status == 200, reply.text
        post = self.fake.wait_for("chat.postMessage", before + 1)[before]
        return buttons(post).get(ids.APPROVE, ""), post

    def unposted(self) -> dict[bytes, bytes]:
        """The unposted queue as Redis holds it: case id -> entry."""
        return {bytes(k): bytes(v) for k, v in self.r.hgetall(SLACK_UNPOSTED).items()}

    def settle(self, user_id: str = "U0ALICE") -> None:
        """A positive signal instead of a sleep before asserting that nothing happened: a
        `/lockguard status` sent now, answered through its own response_url (target
        `settle-N`), has gone through the app after every request sent before it."""
        tag = f"settle-{next(_SETTLES)}"
        reply = self.slash("status", user_id=user_id, response_url=self.fake.response_url(tag))
        assert reply.status == 200, reply.text
        self.fake.wait_for("response_url", where=lambda c: c.target == tag)

    def idle(self, timeout: float = 10.0) -> None:
        """A positive signal that every job handed to the app's worker pool before now has
        finished: one job per worker, queued behind them, all running at once (they wait for
        each other) means that no other job was running any more."""
        barrier = threading.Barrier(WORKERS + 1, timeout=timeout)
        for _ in range(WORKERS):
            self.served.slack.work.submit("idle", barrier.wait)
        barrier.wait()

    def calls_but_settling(self, method: str | None = None) -> list[Call]:
        """The calls the app made, without the answers to `settle`."""
        return [
            c
            for c in self.fake.calls(method)
            if not (c.method == "response_url" and str(c.target).startswith("settle-"))
        ]

    def posted_ts(self, post: Call) -> str:
        return str(post.response["ts"])


_SETTLES = itertools.count(1)
Factory = Callable[..., SlackAppHarness]


@pytest.fixture
def slack_app(
    slack_fake: FakeSlack, redis_server: Any, real_redis: redis.Redis
) -> Iterator[Factory]:
    """`slack_app(**env)`: the app served with these settings on top of `base_env`;
    `slack_app(repost_every=0.2)` runs the reposter's timer that often, `tuning=Tuning(...)`
    shortens the lease, check and resume timings (`bot.serve.operations.Tuning`)."""
    started: list[SlackAppHarness] = []
    fake = slack_fake

    def make(
        repost_every: float = REPOST_EVERY, tuning: Tuning | None = None, **env: str
    ) -> SlackAppHarness:
        settings = load_settings(env=with_env(base_env(redis_server.port, fake), env))
        log = io.StringIO()
        served = serve.start(settings, port=0, err=log, repost_every=repost_every, tuning=tuning)
        harness = SlackAppHarness(fake, served, real_redis, log)
        started.append(harness)
        return harness

    try:
        yield make
    finally:
        for h in started:
            h.served.stop()
