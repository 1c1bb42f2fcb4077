"""Alerts in LOCKGUARD_SLACK_CHANNEL: Redis down or refusing us, scans no person typed failing,
releases that errored; each posted once while it lasts, and cleared by a recovery.
"""

from __future__ import annotations

import json

import redis

from bot.core.errors import ConfigError, RedisUnavailableError
from bot.slack.blocks import ids
from tests.slack_app_harness import ALERTS, Factory, SlackAppHarness, blocks_text
from tests.slack_app_harness import slack_app as slack_app  # the fixture
from tests.slack_mock import Call

PASSWORD = "lg-Alert-Passw0rd-91c"


def alerts(app: SlackAppHarness) -> list[Call]:
    """The alerts posted in LOCKGUARD_SLACK_CHANNEL (where scans post their findings too)."""
    return [
        c
        for c in app.fake.calls("chat.postMessage")
        if c.body["channel"] == ALERTS
        and not any(w in str(c.body.get("text")) for w in (" flagged on ", "all healthy on "))
    ]


def everything_sent(app: SlackAppHarness) -> str:
    return json.dumps([(c.body, c.headers) for c in app.fake.calls()], default=str)


def test_redis_down_during_a_slash_scan_alerts_once_and_tells_the_person(
    slack_app: Factory, closed_port: int
) -> None:
    app = slack_app(REDIS_PORT=str(closed_port), REDIS_PASSWORD=PASSWORD)
    for n in (1, 2):
        # Told in the ack: the command cannot be recorded (`bot.slack.replays`), so it is not run.
        reply = app.slash("scan", response_url=app.fake.response_url(f"r{n}"))
        assert reply.status == 200
        answer = reply.json()
        assert answer["response_type"] == "ephemeral"
        assert "cannot reach Redis at redis://127.0.0.1:" in answer["text"]
        assert "Traceback" not in answer["text"]
        app.fake.wait_for("chat.postMessage")
    app.idle()  # the second failure's alert job has finished too
    [alert] = alerts(app)  # the second failure is the same alert: not posted again
    assert "Redis unreachable" in alert.body["text"]
    assert f"127.0.0.1:{closed_port}" in blocks_text(alert)
    assert "Traceback" not in blocks_text(alert)
    assert PASSWORD not in everything_sent(app)


def test_redis_refusing_the_password_is_alerted(
    slack_app: Factory, auth_redis_server: object
) -> None:
    port = auth_redis_server.port  # type: ignore[attr-defined]
    app = slack_app(REDIS_PORT=str(port), REDIS_PASSWORD="not-the-password-x7")
    reply = app.slash("scan", response_url=app.fake.response_url("r"))
    assert "refused the credentials" in reply.json()["text"]  # in the ack: nothing was run
    app.fake.wait_for("chat.postMessage")
    [alert] = alerts(app)
    assert "refused the credentials" in blocks_text(alert)
    assert "not-the-password-x7" not in everything_sent(app)


def test_a_failing_scheduled_scan_alerts_once_until_it_recovers(slack_app: Factory) -> None:
    app = slack_app()
    notifier = app.served.slack.notifier
    error = ConfigError("pattern: the schedule's pattern is broken")
    notifier.scan_failed("schedule", error)
    notifier.scan_failed("schedule", error)
    assert len(alerts(app)) == 1
    assert "the schedule scan failed" in alerts(app)[0].body["text"]
    # A restart (or another replica) remembers it through Redis: still not posted again.
    again = slack_app()
    again.served.slack.notifier.scan_failed("schedule", error)
    assert len(alerts(app)) == 1
    notifier.scan_ok("schedule")
    assert "resolved" in alerts(app)[-1].body["text"]
    assert len(alerts(app)) == 2
    notifier.scan_failed("schedule", error)
    assert len(alerts(app)) == 3  # a new failure after the recovery is news again


def test_a_person_typed_scan_error_is_not_alerted_but_redis_trouble_is(slack_app: Factory) -> None:
    app = slack_app()
    notifier = app.served.slack.notifier
    notifier.scan_failed("slash", ConfigError("pattern: bad"))
    assert alerts(app) == []
    notifier.scan_failed("webhook", RedisUnavailableError("cannot reach Redis at x"))
    assert len(alerts(app)) == 1
    notifier.scan_ok("webhook")
    assert "Redis answers again" in blocks_text(alerts(app)[-1])


def test_a_release_that_errors_is_alerted_and_the_message_says_not_verified(
    slack_app: Factory, real_redis: redis.Redis, redis_server: object
) -> None:
    port = redis_server.port  # type: ignore[attr-defined]
    scanner = slack_app(LOCKGUARD_DRY_RUN="false")
    scanner.plant()
    case_id, post = scanner.scan()
    scanner.served.stop()
    # The approving replica's Redis user may not DEL: the release script fails on the lock.
    real_redis.acl_setuser(
        "lg-nodel",
        enabled=True,
        passwords=["+pw-nodel-3"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-del"],
    )
    try:
        app = slack_app(
            REDIS_URL=f"redis://lg-nodel:pw-nodel-3@127.0.0.1:{port}/0", LOCKGUARD_DRY_RUN="false"
        )
        app.click(ids.APPROVE, case_id, message_ts=app.posted_ts(post))
        update = app.fake.wait_for("chat.update")[0]
        assert "Incomplete" in update.body["text"]
        assert "Not verified: 1 lock ended in error" in blocks_text(update)
        app.fake.wait_for("chat.postMessage", 2)
        [alert] = alerts(app)
        assert "a release was not verified" in alert.body["text"]
        assert case_id in blocks_text(alert)
        assert "--resume" in blocks_text(alert)
        assert real_redis.exists(b"lock:stuck") == 1
        assert "pw-nodel-3" not in everything_sent(app)
    finally:
        real_redis.acl_deluser("lg-nodel")
