"""`lockguard serve`'s always-on side, end to end on one running serve (a real redis-server, the
mock Slack Web API, real HTTP): the webhook, scheduled scans and `/metrics`, the silence alarm
with `/healthz`, silence watches, the digest, `/lockguard status` and the Home tab."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from bot import serve
from bot.core.errors import ConfigError
from bot.demo.embedded import RedisProcess
from bot.serve.operations import Tuning
from bot.slack.blocks import ids
from bot.store.keyspace import FORMAT, KEYSPACE, LAST_SCAN, LEADER
from tests.block_kit import check_view
from tests.conftest import missing
from tests.core.test_layouts import uuid1_hex
from tests.slack_app_harness import ALERTS, Factory, SlackAppHarness, blocks_text, buttons
from tests.slack_app_harness import slack_app as slack_app  # the fixture
from tests.slack_mock import Call
from tests.slack_requests import SlackReply, app_home_opened, event_callback, post

FAST = Tuning(lease_ms=1_000, check_every_s=0.1)
KEY = "whk-Test-Key-0123456789abcdef"
DESIGN_METRICS = {
    "lockguard_scans",
    "lockguard_last_scan_success_timestamp_seconds",
    "lockguard_scan_duration_seconds",
    "lockguard_locks",
    "lockguard_oldest_lock_age_seconds",
    "lockguard_cases",
    "lockguard_releases",
    "lockguard_scheduler_leader",
    "lockguard_target_up",
    # added for the alert rules of deploy/prometheus (not in DESIGN §6, which they extend)
    "lockguard_oldest_pending_case_age_seconds",
    "lockguard_scans_overdue",
}


def get(url: str, headers: dict[str, str] | None = None) -> SlackReply:
    split = urlsplit(url)
    conn = http.client.HTTPConnection(split.hostname or "", split.port or 80, timeout=10)
    try:
        conn.request("GET", split.path, headers=headers or {})
        r = conn.getresponse()
        return SlackReply(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


def wait_until(condition: Callable[[], object], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def check_rounds(app: SlackAppHarness, monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """How many health checks the checks thread (`lockguard-checks`) has started from now on:
    once it has started n + 2 after a count of n, check n + 1 ran whole (the alarms, the metrics)
    after that count. `/healthz` runs the same check on its own threads: not counted."""
    health = app.served.ops.home.health
    check = health.check
    started: list[None] = []

    def counted() -> Any:
        if threading.current_thread().name == "lockguard-checks":
            started.append(None)
        return check()

    monkeypatch.setattr(health, "check", counted)
    return lambda: len(started)


def after_checks(rounds: Callable[[], int], n: int, timeout: float = 10.0) -> None:
    """Until `n` whole health checks have run after this call."""
    seen = rounds()
    wait_until(lambda: rounds() >= seen + n + 1, timeout)


def scans_counted(app: SlackAppHarness, outcome: str) -> float:
    """`lockguard_scans_total{trigger="schedule", outcome=...}` now."""
    return metrics(app).get(
        ("lockguard_scans_total", (("outcome", outcome), ("trigger", "schedule"))), 0
    )


def in_alerts(app: SlackAppHarness, starts: str = "") -> list[Call]:
    """What the app posted in the alerts channel, whose text starts with `starts`."""
    return [
        c
        for c in app.fake.calls("chat.postMessage")
        if c.body.get("channel") == ALERTS and str(c.body["text"]).startswith(starts)
    ]


def alert_updates(app: SlackAppHarness) -> list[Call]:
    """The messages the app rewrote in the alerts channel (`chat.update`)."""
    return [c for c in app.fake.calls("chat.update") if c.body.get("channel") == ALERTS]


def scans_recorded(r: redis.Redis) -> int:
    return sum(1 for _, f in r.xrange(b"{lockguard}:audit") if f[b"event"] == b"scan")


def webhook(app: SlackAppHarness, headers: dict[str, str]) -> SlackReply:
    return post(app.served.url + "/hooks/scan", b"", headers)


def metrics(
    app: SlackAppHarness,
    headers: dict[str, str] | None = None,
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of `/metrics`, parsed by prometheus_client: (name, labels) -> value. Every
    sample is the implicit target's (`target="default"`: no targets file), left out of labels."""
    reply = get(app.served.url + "/metrics", headers)
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = list(text_string_to_metric_families(reply.text))
    assert {f.name for f in families} == DESIGN_METRICS
    samples = [s for f in families for s in f.samples]
    assert {s.labels.get("target") for s in samples} == {"default"}
    return {
        (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "target"))): s.value
        for s in samples
    }


def status_text(app: SlackAppHarness, target: str) -> str:
    assert app.slash("status", response_url=app.fake.response_url(target)).status == 200
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for call in app.fake.calls("response_url"):
            if call.target == target:
                return json.dumps(call.body, ensure_ascii=False)
        time.sleep(0.02)
    raise AssertionError("no status answer")


# -- the webhook -------------------------------------------------------------------------------


def test_webhook_runs_nothing_on_a_wrong_key_and_posts_findings_on_the_right_one(
    slack_app: Factory, real_redis: redis.Redis
) -> None:
    off = slack_app()
    assert webhook(off, {"Authorization": f"Bearer {KEY}"}).status == 404  # no key: no webhook
    off.served.stop()
    app = slack_app(LOCKGUARD_WEBHOOK_KEY=KEY)
    app.plant(b"lock:stuck")
    for headers in (
        {},
        {"Authorization": "Bearer wrong-key-0123456789abcdef"},
        {"X-Lockguard-Key": KEY[:-1]},
    ):
        reply = webhook(app, headers)
        assert reply.status == 401
        assert reply.json() == {"error": "unauthorized"}
    assert scans_recorded(real_redis) == 0
    assert not real_redis.exists(LAST_SCAN)
    reply = webhook(app, {"Authorization": f"Bearer {KEY}"})
    assert reply.status == 200
    body = reply.json()
    assert body["finding_count"] == 1
    assert [f["key"] for f in body["findings"]] == ["lock:stuck"]
    assert body["findings_truncated"] == 0
    assert scans_recorded(real_redis) == 1
    [posted] = app.fake.wait_for("chat.postMessage")
    assert posted.body["channel"] == ALERTS
    assert "lock:stuck" in blocks_text(posted)
    case_id = buttons(posted)[ids.APPROVE]
    assert case_id == body["case"]["case_id"]
    # The same findings again (the lock is in that case already): answered, not posted again.
    again = webhook(app, {"X-Lockguard-Key": KEY})
    assert again.status == 200
    assert again.json()["finding_count"] == 1
    app.settle()
    assert len(app.fake.calls("chat.postMessage")) == 1
    # Failures from one address are limited: 5 within a minute, then wrong keys get 429; the
    # right key from the same address still runs.
    for _ in range(2):
        assert webhook(app, {"X-Lockguard-Key": "nope-0123456789abcdef"}).status == 401
    limited = webhook(app, {"X-Lockguard-Key": "nope-0123456789abcdef"})
    assert limited.status == 429
    assert int(limited.headers["retry-after"]) > 0
    assert scans_recorded(real_redis) == 2
    assert webhook(app, {"X-Lockguard-Key": KEY}).status == 200
    assert scans_recorded(real_redis) == 3
    got = metrics(app)
    assert got[("lockguard_scans_total", (("outcome", "findings"), ("trigger", "webhook")))] == 3
    # One Redis reads no `target` (a fleet's): whatever is sent is ignored, as it always was.
    named = post(
        app.served.url + "/hooks/scan?target=no%20such!", b'{"target": 5}', {"X-Lockguard-Key": KEY}
    )
    assert (named.status, named.json()["finding_count"]) == (200, 1)


# -- scheduled scans, metrics and status ------------------------------------------------------


def test_metrics_token_guards_serves_metrics(slack_app: Factory) -> None:
    token = "mt-Serve-Token-0123456789abcdef"
    app = slack_app(LOCKGUARD_METRICS_TOKEN=token)
    for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789abcdef"}):
        reply = get(app.served.url + "/metrics", headers)
        assert reply.status == 401
        assert reply.json() == {"error": "unauthorized"}
        assert b"lockguard_" not in reply.body
    got = metrics(app, {"Authorization": f"Bearer {token}"})
    assert ("lockguard_scheduler_leader", ()) in got
    assert get(app.served.url + "/healthz").status == 200  # the token guards /metrics only


def test_scheduled_scans_post_findings_once_feed_metrics_and_status(
    slack_app: Factory, real_redis: redis.Redis
) -> None:
    app = slack_app(tuning=FAST, LOCKGUARD_SCAN_SCHEDULE="every 1s", LOCKGUARD_DRY_RUN="false")
    app.plant(b"lock:stuck")
    [posted] = app.fake.wait_for("chat.postMessage", timeout=3)
    assert posted.body["channel"] == ALERTS  # the channel, as a slash scan posts it
    case_id = buttons(posted)[ids.APPROVE]
    wait_until(lambda: scans_recorded(real_redis) >= 2, 3)
    assert len(in_alerts(app)) == 1  # the same findings are not posted every tick
    got = metrics(app)
    assert got[("lockguard_scans_total", (("outcome", "findings"), ("trigger", "schedule")))] >= 2
    assert got[("lockguard_scans_total", (("outcome", "failed"), ("trigger", "schedule")))] == 0
    assert got[("lockguard_scheduler_leader", ())] == 1
    assert got[("lockguard_locks", (("verdict", "infinite_ttl"),))] == 1
    assert got[("lockguard_last_scan_success_timestamp_seconds", ())] > time.time() - 10
    assert got[("lockguard_scan_duration_seconds_count", ())] >= 2
    assert got[("lockguard_cases", (("state", "pending"),))] == 1
    text = status_text(app, "status")
    assert "Next scheduled scan" in text
    assert "every 1s" in text
    assert "(this replica)" in text
    assert "Next digest" in text
    # An approval from Slack releases the lock and feeds lockguard_releases_total; the healthy
    # scans that follow post nothing.
    assert app.click(ids.APPROVE, case_id, message_ts=app.posted_ts(posted)).status == 200
    wait_until(lambda: not real_redis.exists(b"lock:stuck"))
    before = scans_recorded(real_redis)
    wait_until(lambda: scans_recorded(real_redis) >= before + 2, 3)
    assert len(in_alerts(app)) == 1
    got = metrics(app)
    assert got[("lockguard_releases_total", (("outcome", "released"),))] == 1
    assert got[("lockguard_scans_total", (("outcome", "ok"), ("trigger", "schedule")))] >= 1


# -- the silence alarm and /healthz ----------------------------------------------------------


def assert_says_only(reply: SlackReply, problem: str, *never: str) -> None:
    """/healthz is 503 naming `problem` in lockguard's words, and nothing of `never`."""
    assert reply.status == 503
    body = reply.json()
    assert body["status"] == "unhealthy"
    assert body["reasons"] == [f"redis: {problem}"]
    assert body["redis"] == problem
    for text in ("127.0.0.1", "localhost", "redis://", "Errno", "Error", "Connection", *never):
        assert text not in reply.text, text


def test_healthz_names_the_problem_without_addresses_or_redis_words(
    slack_app: Factory, closed_port: int, auth_redis_server: Any
) -> None:
    down = slack_app(
        REDIS_URL=f"redis://:pw-Down-Secret-1@127.0.0.1:{closed_port}/0",
        LOCKGUARD_REDIS_TIMEOUT_SECONDS="1",
        LOCKGUARD_WEBHOOK_KEY=KEY,
    )
    assert_says_only(
        get(down.served.url + "/healthz"),
        "unreachable",
        str(closed_port),
        "pw-Down-Secret-1",
        "refused",
    )
    # A webhook scan is 503 (tests/ops/test_webhook.py) and counted as failed.
    assert webhook(down, {"Authorization": f"Bearer {KEY}"}).status == 503
    failed = ("lockguard_scans_total", (("outcome", "failed"), ("trigger", "webhook")))
    assert metrics(down)[failed] == 1
    # ...while /livez, the liveness probe's, is 200: a restart would not bring Redis back.
    live = get(down.served.url + "/livez")
    assert (live.status, live.json()) == (200, {"status": "alive"})
    port = str(auth_redis_server.port)
    for password in ("", "pw-Wrong-Secret-2"):
        url = (
            f"redis://:{password}@127.0.0.1:{port}/0" if password else f"redis://127.0.0.1:{port}/0"
        )
        app = slack_app(REDIS_URL=url)
        assert_says_only(
            get(app.served.url + "/healthz"),
            "refused (auth)",
            port,
            "NOAUTH",
            "WRONGPASS",
            "uthentication",
            "password",
            "pw-Wrong",
        )


@pytest.fixture
def noscan(real_redis: redis.Redis) -> Iterator[tuple[str, str]]:
    """A Redis user who may do everything but SCAN."""
    user, password = "lg-noscan", "pw-Noscan-Ops-41"
    real_redis.execute_command(
        "ACL", "SETUSER", user, "reset", "on", f">{password}", "~*", "&*", "+@all", "-scan"
    )
    real_redis.set(KEYSPACE, FORMAT)  # migrated: the scan itself is what is refused
    yield user, password
    real_redis.execute_command("ACL", "DELUSER", user)


def test_scans_that_keep_failing_are_one_alarm_with_scans_overdue_in_it_and_one_recovery(
    noscan: tuple[str, str],
    slack_app: Factory,
    redis_server: Any,
    real_redis: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    user, password = noscan
    app = slack_app(
        tuning=FAST,
        LOCKGUARD_SCAN_SCHEDULE="every 1s",
        REDIS_URL=f"redis://{user}:{password}@127.0.0.1:{redis_server.port}/0",
    )
    rounds = check_rounds(app, monkeypatch)
    url = app.served.url + "/healthz"
    assert get(url).status == 200  # starting: not overdue before twice the interval

    def overdue() -> list[Call]:
        return [c for c in alert_updates(app) if "lockguard scans are overdue" in c.body["text"]]

    # The refused scans post the outage's one message; scans overdue join it in place.
    wait_until(overdue, 5)
    # Two more failed scans and ten more checks, each of which could post the outage again.
    failed = scans_counted(app, "failed")
    wait_until(lambda: scans_counted(app, "failed") >= failed + 2, 5)
    after_checks(rounds, 10)
    [alarm] = in_alerts(app, "lockguard: ")
    assert alarm.body["text"].startswith("lockguard: Redis unreachable or refusing")
    shown = overdue()[-1]
    assert shown.body["ts"] == app.posted_ts(alarm)
    assert "No completed scan recorded" in blocks_text(shown)
    assert "Redis unreachable or refusing" in blocks_text(shown)  # both, in one message
    assert len(in_alerts(app, "lockguard: Redis unreachable or refusing")) == 1
    sick = get(url)
    assert sick.status == 503
    assert sick.json()["reasons"][0].startswith("scans overdue: ")
    assert sick.json()["scans"]["state"] == "overdue"
    real_redis.execute_command("ACL", "SETUSER", user, "+scan")
    wait_until(lambda: in_alerts(app, "lockguard: resolved"), 4)
    # Two more scans that work and ten more checks, each of which could recover it again.
    ok = scans_counted(app, "ok")
    wait_until(lambda: scans_counted(app, "ok") >= ok + 2, 5)
    after_checks(rounds, 10)
    [recovery] = in_alerts(app, "lockguard: resolved")  # one recovery for the whole outage
    assert "lockguard scans complete again" in recovery.body["text"]
    assert "Redis answers again" in recovery.body["text"]
    assert [c for c in in_alerts(app) if "resolved" not in c.body["text"]] == [alarm]
    assert all(c.body["ts"] == app.posted_ts(alarm) for c in alert_updates(app))
    assert alert_updates(app)[-1].body["text"].startswith("lockguard: resolved")
    well = get(url)
    assert well.status == 200
    assert well.json()["status"] == "ok"
    got = metrics(app)
    assert got[("lockguard_scans_total", (("outcome", "failed"), ("trigger", "schedule")))] >= 2


def test_one_redis_outage_is_one_message_updated_in_place_then_one_recovery(
    slack_app: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis stopped under a running serve (scans every 2 s, the default check timing): the
    first alarm comes within two scan intervals; whatever else goes wrong meanwhile (scans
    failing, scans overdue once Redis is back) rewrites that one message; one recovery."""
    try:
        server = RedisProcess()
    except FileNotFoundError:
        missing("redis-server is not installed")
    try:
        app = slack_app(
            tuning=Tuning(lease_ms=1_000),
            LOCKGUARD_SCAN_SCHEDULE="every 2s",
            REDIS_URL=f"redis://127.0.0.1:{server.port}/0",
            LOCKGUARD_REDIS_TIMEOUT_SECONDS="1",
        )
        rounds = check_rounds(app, monkeypatch)
        wait_until(lambda: scans_recorded(server.client()) >= 1, 6)
        server.crash()
        down = time.monotonic()
        wait_until(lambda: in_alerts(app, "lockguard: "), 6)
        first_alarm = time.monotonic() - down
        assert first_alarm <= 4.5, first_alarm  # within two scan intervals (and a check)
        time.sleep(6)  # three intervals down: scans failing, then overdue once Redis is back
        server.restart()
        wait_until(lambda: in_alerts(app, "lockguard: resolved"), 15)
        # Two more scans and three more checks (one a second here): nothing more is posted.
        scanned = scans_recorded(server.client())
        wait_until(lambda: scans_recorded(server.client()) >= scanned + 2, 10)
        after_checks(rounds, 3)
        [alarm] = [c for c in in_alerts(app, "lockguard: ") if "resolved" not in c.body["text"]]
        assert "Redis unreachable or refusing lockguard" in alarm.body["text"]
        assert f"127.0.0.1:{server.port}" in blocks_text(alarm)
        [recovery] = in_alerts(app, "lockguard: resolved")
        assert "Redis answers again" in recovery.body["text"]
        ts = app.posted_ts(alarm)
        updates = alert_updates(app)
        assert updates
        assert all(c.body["ts"] == ts for c in updates)  # that one message, in place
        assert updates[-1].body["text"].startswith("lockguard: resolved")
        print(f"first alarm {first_alarm:.1f} s after Redis stopped; {len(updates)} update(s)")
    finally:
        server.stop()


def test_two_replicas_show_one_outage_in_one_message_and_one_recovery(slack_app: Factory) -> None:
    a, b = slack_app(), slack_app()
    na, nb = a.served.slack.notifier, b.served.slack.notifier
    na.scan_failed("schedule", ConfigError("pattern: the schedule's pattern is broken"))
    [alarm] = in_alerts(a)
    assert alarm.body["text"].startswith("lockguard: the schedule scan failed")
    # The other replica's silence alarm joins the same message (found through Redis).
    assert nb.raise_alert("silence:scans", "lockguard scans are overdue", "No scan for 31m.")
    assert len(in_alerts(a)) == 1
    joined = alert_updates(a)[-1]
    assert joined.body["ts"] == a.posted_ts(alarm)
    assert joined.body["text"].startswith("lockguard: the schedule scan failed (+1 more: ")
    for words in ("the schedule scan failed", "pattern is broken", "scans are overdue"):
        assert words in blocks_text(joined)
    nb.resolve("silence:scans", "lockguard scans complete again")  # one left: still out
    assert in_alerts(a, "lockguard: resolved") == []
    left = alert_updates(a)[-1]
    assert "scans are overdue" not in blocks_text(left)
    assert "Cleared meanwhile: lockguard scans complete again" in blocks_text(left)
    na.scan_ok("schedule")
    [recovery] = in_alerts(a, "lockguard: resolved")
    assert "the schedule scan works again" in recovery.body["text"]
    assert alert_updates(a)[-1].body["text"].startswith("lockguard: resolved")
    nb.scan_failed("schedule", ConfigError("pattern: broken again"))  # a new outage: news
    fresh = [c for c in in_alerts(a) if "resolved" not in c.body["text"]]
    assert len(fresh) == 2
    assert a.posted_ts(fresh[1]) != a.posted_ts(alarm)


def test_a_problem_another_replica_cleared_is_not_shown_again(slack_app: Factory) -> None:
    a, b = slack_app(), slack_app()
    na, nb = a.served.slack.notifier, b.served.slack.notifier
    na.scan_failed("schedule", ConfigError("pattern: the schedule's pattern is broken"))
    nb.raise_alert("silence:scans", "lockguard scans are overdue", "No scan for 31m.")
    na.resolve("silence:scans", "lockguard scans complete again")  # this replica's check won
    assert "scans are overdue" not in blocks_text(alert_updates(a)[-1])
    nb.raise_alert("digest", "the digest was not posted", "Slack did not take it (fatal_error)")
    latest = alert_updates(a)[-1]
    assert "the digest was not posted" in blocks_text(latest)
    assert "the schedule scan failed" in blocks_text(latest)
    assert "scans are overdue" not in blocks_text(latest)  # cleared by the other replica
    assert len(in_alerts(a)) == 1


def test_a_stale_watch_alerts_once_shows_in_status_and_recovers_once(
    slack_app: Factory, real_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_redis.set(b"jobs:nightly:last_ok", int(time.time()) - 7_200)
    app = slack_app(tuning=FAST, LOCKGUARD_WATCHES="jobs:nightly:last_ok=3600")
    rounds = check_rounds(app, monkeypatch)
    title = "lockguard: silence watch jobs:nightly:last_ok: stale"
    wait_until(lambda: in_alerts(app, title), 3)
    after_checks(rounds, 5)  # each of them finds the watch still stale
    assert len(in_alerts(app, title)) == 1
    health = get(app.served.url + "/healthz")
    assert health.status == 200  # a user's job that stopped is not lockguard being broken
    assert health.json()["warnings"][0].startswith("silence watch overdue: jobs:nightly:last_ok")
    text = status_text(app, "watch")
    assert "Silence watches late" in text
    assert "jobs:nightly:last_ok" in text
    real_redis.set(b"jobs:nightly:last_ok", int(time.time()))
    fresh = "lockguard: resolved: silence watch jobs:nightly:last_ok is fresh again"
    wait_until(lambda: in_alerts(app, fresh), 3)
    after_checks(rounds, 5)  # each of them finds it fresh
    assert len(in_alerts(app, fresh)) == 1
    assert len(in_alerts(app, title)) == 1


# -- the digest and the Home tab -------------------------------------------------------------


def test_the_digest_lists_an_ageing_healthy_lock_with_its_age_and_counts_since_the_last(
    slack_app: Factory, real_redis: redis.Redis
) -> None:
    now_ms = int(real_redis.time()[0]) * 1000
    real_redis.set(b"lock:ageing", uuid1_hex(now_ms - 10 * 60_000), px=3_600_000)  # held 10 min
    app = slack_app(
        tuning=FAST, LOCKGUARD_STALE_THRESHOLD_SECONDS="900", LOCKGUARD_DIGEST_SCHEDULE="every 1s"
    )
    assert app.slash("scan").status == 200  # one scan, counted for the digest
    wait_until(lambda: scans_recorded(real_redis) == 1)
    wait_until(lambda: len(in_alerts(app, "lockguard digest")) >= 2, 4)
    first, second = in_alerts(app, "lockguard digest")[:2]
    shown = blocks_text(first)
    line = next(s for s in json.loads(shown) if "lock:ageing" in json.dumps(s))["text"]["text"]
    assert "held *10m0" in line  # its age, though it is healthy
    assert "Healthy" in line or "healthy" in line
    assert "1 completed, 0 failed" in shown
    assert "(this replica)" not in shown  # the digest names the replica by its id
    assert "0 completed, 0 failed" in blocks_text(second)  # counted since the last digest
    assert "since the last digest" in second.body["text"]


def test_opening_the_home_tab_publishes_a_valid_view(
    slack_app: Factory, real_redis: redis.Redis
) -> None:
    app = slack_app(tuning=FAST, LOCKGUARD_SCAN_SCHEDULE="every 1s")
    app.plant(b"lock:stuck")
    wait_until(lambda: scans_recorded(real_redis) >= 1, 3)
    reply = event_callback(app.url, "lg-signing-secret-for-tests", event=app_home_opened())
    assert reply.status == 200
    [published] = app.fake.wait_for("views.publish")
    assert published.body["user_id"] == "U0ALICE"
    view = published.body["view"]
    check_view(view)
    assert view["type"] == "home"
    text = json.dumps(view, ensure_ascii=False)
    for words in ("lock:stuck", "Open cases", "Next scan", "Lock ages"):
        assert words in text
    messages = event_callback(
        app.url,
        "lg-signing-secret-for-tests",
        event_id="Ev0OTHER",
        event=app_home_opened(tab="messages"),
    )
    assert messages.status == 200
    unsigned = event_callback(app.url, "not-the-secret", event=app_home_opened())
    assert unsigned.status == 401
    app.settle()
    assert len(app.fake.calls("views.publish")) == 1


# -- serve's own wiring ----------------------------------------------------------------------


def test_both_modes_serve_webhook_health_and_metrics_and_stop_gives_the_lease_back(
    slack_app: Factory, real_redis: redis.Redis
) -> None:
    app = slack_app(tuning=FAST)
    served = app.served
    paths = {(r.method, r.path) for r in serve.routes(served.slack, served.ops, socket_mode=True)}
    assert paths == {
        ("POST", "/hooks/scan"),
        ("GET", "/healthz"),
        ("GET", "/livez"),
        ("GET", "/metrics"),
    }
    http_paths = {
        (r.method, r.path) for r in serve.routes(served.slack, served.ops, socket_mode=False)
    }
    assert http_paths == paths | {("POST", "/slack/events")}
    wait_until(lambda: served.ops.home.scheduler.is_leader, 2)
    assert real_redis.exists(LEADER)
    served.stop()
    assert not real_redis.exists(LEADER)  # given back at once: another replica need not wait
    assert not served.ops.home.scheduler.is_leader
    assert served.ops.checks._thread is None  # the check loop has ended
    served.stop()  # twice is fine
