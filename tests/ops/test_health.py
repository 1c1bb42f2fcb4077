"""bot.ops.health and `GET /healthz`: scans overdue (an ACL user who may not SCAN), the silence
alarm raised and recovered exactly once across checks and replicas, silence watches, Redis down."""

from __future__ import annotations

import http.client
import json
import logging
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from bot.cases.reclaim_config import ReclaimConfig
from bot.compose import build_engine
from bot.config import load_settings
from bot.core.errors import RedisRefusedError
from bot.core.rules import Policy
from bot.engine import Engine
from bot.ops.health import (
    OFF,
    OK,
    OVERDUE,
    SCANS_KIND,
    STARTING,
    Health,
    HealthReport,
    SilenceAlarm,
    health_route,
    redis_problem,
)
from bot.ops.http_server import HttpServer
from bot.ops.watches import Watch, evaluate, parse_watches
from bot.scan.result import ScanOptions
from bot.store import scans
from bot.store.keyspace import SILENCE
from tests.conftest import RedisServer
from tests.ops.test_webhook import captured as captured  # the fixture
from tests.ops.test_webhook import logged

POLICY = Policy(stale_threshold_ms=30_000)


def engine(client: redis.Redis) -> Engine:
    return Engine(
        client,
        ScanOptions([b"lock:*"], POLICY),
        ReclaimConfig(policy=POLICY),
        endpoint="redis://test:1/0",
    )


class Channel:
    """What the alarm told the channel."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, ...]] = []

    def alert(self, kind: str, title: str, detail: str) -> None:
        self.posts.append(("alert", kind, title, detail))

    def recovered(self, kind: str, title: str) -> None:
        self.posts.append(("recovered", kind, title))

    def kinds(self) -> list[tuple[str, str]]:
        return [(p[0], p[1]) for p in self.posts]


def get(server: HttpServer, method: str = "GET") -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(method, "/healthz")
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, json.loads(raw) if raw else None
    finally:
        conn.close()


@pytest.fixture
def no_scan_client(real_redis: redis.Redis, redis_server: RedisServer) -> Iterator[redis.Redis]:
    """A client of an ACL user who may do everything but SCAN."""
    name, password = f"lg-noscan-{secrets.token_hex(3)}", f"pw-{secrets.token_hex(8)}"
    real_redis.execute_command(
        "ACL", "SETUSER", name, "on", f">{password}", "~*", "&*", "+@all", "-scan"
    )
    client = redis_server.client(username=name, password=password)
    yield client
    client.close()
    real_redis.execute_command("ACL", "DELUSER", name)


def wait_past(limit_s: float, start: float) -> None:
    time.sleep(max(0.0, start + limit_s + 0.05 - time.monotonic()))


def test_failing_scans_raise_the_alarm_once_and_recovery_is_announced_once(
    real_redis: redis.Redis, no_scan_client: redis.Redis
) -> None:
    admin, denied = engine(real_redis), engine(no_scan_client)
    admin.scan("schedule", propose=False)  # the last scan that completed
    health = Health(denied, interval_seconds=0.75)  # overdue after 1.5 s
    channel = Channel()
    replica_a = SilenceAlarm(denied, channel.alert, channel.recovered)
    replica_b = SilenceAlarm(engine(no_scan_client), channel.alert, channel.recovered)
    with HttpServer("127.0.0.1", 0, [health_route(health.answer)]) as srv:
        status, body = get(srv)
        replica_a.observe(health.check())  # serve's check loop, on each replica
        began = time.monotonic()  # after the first check and the last completed scan
        assert (status, body["status"], body["scans"]["state"]) == (200, "ok", OK)
        with pytest.raises(RedisRefusedError, match="SCAN"):
            denied.scan("schedule")
        wait_past(1.5, began)
        for _ in range(4):  # scans keep failing; both replicas keep checking
            with pytest.raises(RedisRefusedError):
                denied.scan("schedule")
            status, body = get(srv)
            assert status == 503
            assert body["status"] == "unhealthy"
            assert body["reasons"][0].startswith("scans overdue: no scan has completed for ")
            assert body["scans"]["state"] == OVERDUE
            replica_a.observe(health.check())
            replica_b.observe(health.check())
        assert channel.kinds() == [("alert", SCANS_KIND)]
        assert channel.posts[0][2] == "lockguard scans are overdue"
        assert channel.posts[0][3].startswith("No scan has completed for ")
        assert (
            " UTC); expected within 1s (twice the scan interval). Scans may be failing"
            in channel.posts[0][3]
        )
        assert real_redis.hkeys(SILENCE) == [b"scans"]
        # A restarted replica (no memory of its own) does not post it again either.
        restarted = SilenceAlarm(engine(real_redis), channel.alert, channel.recovered)
        assert restarted.observe(health.check()) == []
        assert len(channel.posts) == 1

        admin.scan("schedule", propose=False)  # scans work again
        for _ in range(3):
            status, body = get(srv)
            assert (status, body["status"], body["reasons"]) == (200, "ok", [])
            replica_a.observe(health.check())
            replica_b.observe(health.check())
    assert channel.kinds() == [("alert", SCANS_KIND), ("recovered", SCANS_KIND)]
    assert real_redis.hlen(SILENCE) == 0


def test_no_scan_ever_is_starting_then_overdue(r: redis.Redis) -> None:
    health = Health(engine(r), interval_seconds=0.25)
    first = health.check()
    began = time.monotonic()  # after this replica's first check
    assert (first.scans, first.healthy) == (STARTING, True)
    channel = Channel()
    alarm = SilenceAlarm(engine(r), channel.alert, channel.recovered)
    assert alarm.observe(first) == []  # starting neither alerts nor recovers
    wait_past(0.5, began)
    later = health.check()
    assert (later.scans, later.healthy) == (OVERDUE, False)
    assert "no completed scan recorded" in later.reasons[0]
    assert alarm.observe(later) == [f"alert {SCANS_KIND}"]
    assert alarm.observe(health.check()) == []


def test_scans_off_is_never_overdue(r: redis.Redis) -> None:
    report = Health(engine(r), interval_seconds=None).check()
    assert (report.scans, report.healthy) == (OFF, True)
    assert report.to_json()["scans"]["limit_seconds"] is None


def test_stale_and_missing_watches_alert_once_and_recover_once(r: redis.Redis) -> None:
    now_s = scans.server_ms(r) // 1000
    r.set(b"job:stale", str(now_s - 600).encode())
    r.set(b"job:fresh", f"{now_s}000".encode())
    watches = parse_watches("job:stale=300,job:fresh=300,job:gone=300")
    e = engine(r)
    health = Health(e, interval_seconds=None, watches=watches)
    channel = Channel()
    alarms = [SilenceAlarm(e, channel.alert, channel.recovered) for _ in range(2)]
    with HttpServer("127.0.0.1", 0, [health_route(health.answer)]) as srv:
        for _ in range(3):
            for alarm in alarms:
                alarm.observe(health.check())
            status, body = get(srv)
            assert (status, body["status"]) == (200, "ok")  # a user's job is not lockguard
            assert [w["problem"] for w in body["watches"]] == ["stale", None, "missing"]
            assert len(body["warnings"]) == 2
    assert sorted(channel.kinds()) == [
        ("alert", "silence:watch:job:gone"),
        ("alert", "silence:watch:job:stale"),
    ]
    stale = next(p for p in channel.posts if p[1].endswith("job:stale"))
    assert "job:stale updated 10m" in stale[3]
    assert "allowed 5m00s" in stale[3]
    r.set(b"job:stale", b"2999-01-01T00:00:00Z")  # ahead of the clock: fresh
    for _ in range(3):
        for alarm in alarms:
            alarm.observe(health.check())
    assert channel.kinds()[2:] == [("recovered", "silence:watch:job:stale")]
    assert r.hkeys(SILENCE) == [b"watch:job:gone"]


def test_a_failing_callback_undoes_its_transition(r: redis.Redis) -> None:
    e = engine(r)
    health = Health(e, interval_seconds=None, watches=(Watch(b"job:gone", 60),))
    calls: list[str] = []

    def flaky_alert(kind: str, title: str, detail: str) -> None:
        calls.append(kind)
        if len(calls) == 1:
            raise RuntimeError("slack is down")

    alarm = SilenceAlarm(e, flaky_alert, lambda kind, title: None)
    assert alarm.observe(health.check()) == []
    assert r.hlen(SILENCE) == 0  # undone: the next check tries again
    assert alarm.observe(health.check()) == ["alert silence:watch:job:gone"]
    assert alarm.observe(health.check()) == []
    assert len(calls) == 2

    def flaky_recovered(kind: str, title: str) -> None:
        raise RuntimeError("slack is down")

    r.set(b"job:gone", b"2999-01-01")
    failing = SilenceAlarm(e, flaky_alert, flaky_recovered)
    assert failing.observe(health.check()) == []
    assert r.hlen(SILENCE) == 1  # still alerting: the recovery is announced later
    assert alarm.observe(health.check()) == ["recovered silence:watch:job:gone"]


def test_redis_down_is_503_redis_unreachable_without_the_secret_or_the_address(
    closed_port: int, captured: list[logging.LogRecord]
) -> None:
    settings = load_settings(
        {
            "REDIS_URL": f"redis://:pw-Hidden-9@127.0.0.1:{closed_port}/0",
            "LOCKGUARD_REDIS_TIMEOUT_SECONDS": "1",
        }
    )
    e = build_engine(settings)
    health = Health(e, interval_seconds=60, watches=parse_watches("job:a=60"))
    channel = Channel()
    alarm = SilenceAlarm(e, channel.alert, channel.recovered)
    with HttpServer("127.0.0.1", 0, [health_route(health.answer)]) as srv:
        status, body = get(srv)
        alarm.observe(health.check())  # serve's check loop
        head_status, head_body = get(srv, "HEAD")
        get(srv)
    assert status == 503
    assert (head_status, head_body) == (503, None)
    assert body["status"] == "unhealthy"
    assert body["redis"] == "unreachable"
    assert body["reasons"] == ["redis: unreachable"]
    text = json.dumps(body)
    for never in ("127.0.0.1", str(closed_port), "redis://", "pw-Hidden-9", "refused", "Errno"):
        assert never not in text, never
    assert channel.posts == []  # nothing known: the Slack notifier alerts on Redis itself
    # The operator's detail (naming the endpoint, never the password) is logged, once.
    [record] = [r for r in captured if r.getMessage().startswith("health_redis_failed")]
    assert f"127.0.0.1:{closed_port}" in logged(captured)
    assert "pw-Hidden-9" not in logged(captured)
    assert record.levelno == logging.WARNING


def test_a_password_redis_wants_is_refused_auth_without_its_words(
    auth_redis_server: RedisServer, auth_redis_password: str
) -> None:
    port = auth_redis_server.port
    for url in (f"redis://127.0.0.1:{port}/0", f"redis://:pw-Wrong-77@127.0.0.1:{port}/0"):
        e = build_engine(load_settings({"REDIS_URL": url}, env_file=None))
        with HttpServer("127.0.0.1", 0, [health_route(Health(e, 60).answer)]) as srv:
            status, body = get(srv)
        e.client.close()
        assert status == 503
        assert body["reasons"] == ["redis: refused (auth)"]
        text = json.dumps(body)
        for never in (
            "127.0.0.1",
            str(port),
            "HELLO",
            "NOAUTH",
            "WRONGPASS",
            "uthenticat",
            "pw-Wrong-77",
            auth_redis_password,
        ):
            assert never not in text, never
    good = auth_redis_server.client(password=auth_redis_password)
    assert Health(engine(good), 60).check().redis_error == ""
    good.close()


def test_an_acl_refusal_is_refused_acl(real_redis: redis.Redis, redis_server: RedisServer) -> None:
    real_redis.execute_command(
        "ACL", "SETUSER", "lg-noget", "on", ">pw-Noget-1", "~*", "+@all", "-get"
    )
    noget = redis_server.client(username="lg-noget", password="pw-Noget-1")
    try:
        report = Health(engine(noget), 60).check()
    finally:
        noget.close()
        real_redis.execute_command("ACL", "DELUSER", "lg-noget")
    assert report.reasons == ["redis: refused (acl)"]
    assert report.to_json()["redis"] == "refused (acl)"


@pytest.mark.parametrize(
    ("exc", "words"),
    [
        (
            redis.ConnectionError("Error 111 connecting to 10.1.2.3:6380. Connection refused."),
            "redis: unreachable",
        ),
        (redis.TimeoutError("Timeout connecting to server"), "redis: timed out"),
        (redis.AuthenticationError("invalid username-password pair"), "redis: refused (auth)"),
        (redis.ResponseError("NOAUTH Authentication required."), "redis: refused (auth)"),
        (
            redis.exceptions.NoPermissionError("this user has no permissions to run 'get'"),
            "redis: refused (acl)",
        ),
        (redis.BusyLoadingError("Redis is loading the dataset in memory"), "redis: loading"),
        (redis.ResponseError("ERR something at 10.1.2.3"), "redis: refused"),
        (
            redis.exceptions.RedisClusterException("Cluster mode is not enabled"),
            "redis: cluster unavailable",
        ),
        (
            redis.ConnectionError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"),
            "redis: tls failed",
        ),
        (redis.RedisError("anything else 10.1.2.3:6380"), "redis: unreachable"),
    ],
)
def test_redis_problem_words(exc: redis.RedisError, words: str) -> None:
    assert redis_problem(exc) == words


def test_the_heartbeat_counts_when_the_summary_is_unreadable(r: redis.Redis) -> None:
    now = scans.server_ms(r)
    r.set(b"{lockguard}:scan:last", b"not json")
    r.set(b"{lockguard}:heartbeat", str(now - 1000).encode())
    report = Health(engine(r), interval_seconds=60).check()
    assert report.last_scan_ms == now - 1000
    assert report.scans == OK


W = Watch(b"job", 60)


@pytest.mark.parametrize(
    ("report", "scans", "healthy"),
    [
        (HealthReport("e", 10_000, last_scan_ms=9_000, started_ms=0, limit_ms=1_000), OK, True),
        (
            HealthReport("e", 10_000, last_scan_ms=8_999, started_ms=0, limit_ms=1_000),
            OVERDUE,
            False,
        ),
        (
            HealthReport("e", 10_000, last_scan_ms=1, started_ms=9_500, limit_ms=1_000),
            STARTING,
            True,
        ),
        (HealthReport("e", 10_000, started_ms=9_000, limit_ms=1_000), STARTING, True),
        (HealthReport("e", 10_000, started_ms=8_000, limit_ms=1_000), OVERDUE, False),
        (HealthReport("e", 10_000, started_ms=0, limit_ms=None), OFF, True),
        (
            HealthReport(
                "e", 10_000, started_ms=0, limit_ms=None, watches=(evaluate(W, None, 10_000),)
            ),
            OFF,
            True,
        ),
        (HealthReport("e", redis_error="redis: unreachable", limit_ms=1_000), "", False),
    ],
)
def test_report_states(report: HealthReport, scans: str, healthy: bool) -> None:
    assert report.scans == scans
    assert report.healthy is healthy
    assert (report.to_json()["status"] == "ok") is healthy
    assert bool(report.reasons) is not healthy


# -- how often replicas check, and who alarms a Redis the check cannot reach -------------------


def test_checks_run_every_half_scan_interval_within_one_and_thirty_seconds() -> None:
    from bot.ops.health import check_every

    assert check_every(30.0, 5.0) == 2.5  # scans every 5 s: overdue is seen within 2 intervals
    assert check_every(30.0, 1.0) == 1.0
    assert check_every(30.0, 900.0) == 30.0
    assert check_every(30.0, None) == 30.0  # scans off
    assert check_every(0.1, 5.0) == 0.1  # a test's shorter timing wins


class _Leader:
    def __init__(self, leading: bool) -> None:
        self.leading = leading
        self.listeners: list[Callable[[bool], None]] = []

    def is_leader(self) -> bool:
        return self.leading

    def on_change(self, listener: Callable[[bool], None]) -> None:
        self.listeners.append(listener)

    def become(self, leading: bool) -> None:
        self.leading = leading
        for listener in self.listeners:
            listener(leading)


class _Notifier:
    def __init__(self) -> None:
        self.said: list[str] = []

    def redis_unavailable(self, error: BaseException) -> None:
        self.said.append(f"alert: {error}")

    def resolve(self, kind: str, words: str) -> bool:
        self.said.append(f"{kind}: {words}")
        return True


def test_the_replica_that_led_alerts_a_redis_its_check_cannot_reach_and_clears_it_once() -> None:
    from bot.core.errors import RedisUnavailableError
    from bot.serve.checks import RedisAlarm

    class Checked:
        last_error = RedisUnavailableError("cannot reach Redis at redis://127.0.0.1:1/0")

    ok = HealthReport("redis://127.0.0.1:1/0", checked_ms=1)
    down = HealthReport("redis://127.0.0.1:1/0", redis_error="redis: unreachable")
    follower, told_follower = RedisAlarm(Checked(), _Leader(False)), _Notifier()  # type: ignore[arg-type]
    follower.observe(ok, told_follower)  # type: ignore[arg-type]
    follower.observe(down, told_follower)  # type: ignore[arg-type]
    assert told_follower.said == []  # the leader says it: one message, not one per replica
    leader, told = RedisAlarm(Checked(), _Leader(True)), _Notifier()  # type: ignore[arg-type]
    for report in (ok, down, down, ok, ok):
        leader.observe(report, told)  # type: ignore[arg-type]
    assert told.said == [
        "alert: cannot reach Redis at redis://127.0.0.1:1/0",
        "alert: cannot reach Redis at redis://127.0.0.1:1/0",  # the Notifier keeps it to one
        "redis: Redis answers again",
    ]
    fresh, told_fresh = RedisAlarm(Checked(), _Leader(False)), _Notifier()  # type: ignore[arg-type]
    fresh.observe(down, told_fresh)  # type: ignore[arg-type]
    assert len(told_fresh.said) == 1  # never reached Redis since it started: it alerts


def test_a_replica_that_took_the_lead_after_its_last_check_alerts_a_redis_lost_then() -> None:
    """The race a loaded machine showed (tests/ops/test_ops_serve.py's outage test): the last
    check that reached Redis saw this replica not leading, then it took the lease and scanned,
    then Redis went away before the next check. The one replica that led must still alert."""
    from bot.core.errors import RedisUnavailableError
    from bot.serve.checks import RedisAlarm

    class Checked:
        last_error = RedisUnavailableError("cannot reach Redis at redis://127.0.0.1:1/0")

    ok = HealthReport("redis://127.0.0.1:1/0", checked_ms=1)
    down = HealthReport("redis://127.0.0.1:1/0", redis_error="redis: unreachable")
    lead = _Leader(False)
    alarm, told = RedisAlarm(Checked(), lead), _Notifier()  # type: ignore[arg-type]
    alarm.observe(ok, told)  # type: ignore[arg-type]
    lead.become(True)  # the lease taken between two checks
    lead.become(False)  # ...and lost when Redis went away
    alarm.observe(down, told)  # type: ignore[arg-type]
    assert told.said == ["alert: cannot reach Redis at redis://127.0.0.1:1/0"]
