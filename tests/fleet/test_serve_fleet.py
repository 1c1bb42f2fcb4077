"""`lockguard serve` over a fleet, in this process: three live redis-servers and one target whose
Redis is down, the mock Slack Web API, real HTTP. Each live target is scanned on its own
schedule, its findings go to its own channel, its state stays in its own Redis; `/metrics`
carries `target` and `lockguard_target_up`; `/healthz` stays 200 naming the dead target, and is
503 only when no target answers."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from bot import serve
from bot.config import load_settings
from bot.demo.embedded import RedisProcess, free_port
from bot.fleet import Target
from bot.ops.fleet_health import TargetHealth, fleet_health
from bot.ops.health import HealthReport
from bot.serve.fleet_operations import FleetOperations
from bot.serve.operations import Tuning
from bot.slack.reposter import EVERY as REPOST_EVERY
from bot.store.keyspace import AUDIT_STREAM, LEADER
from tests.block_kit import check_message
from tests.fleet.conftest import DEAD, LIVE
from tests.ops.test_ops_serve import get, wait_until
from tests.slack_app_harness import base_env
from tests.slack_mock import FakeSlack

CHANNELS = {"orders": "C0ORDERS", "queue": "C0QUEUE"}  # sessions: the default channel
FAST = Tuning(lease_ms=1_000, check_every_s=0.1, replica="replica-a")


@pytest.fixture
def clients(servers: dict[str, RedisProcess]) -> Iterator[dict[str, redis.Redis]]:
    out = {name: server.client() for name, server in servers.items()}
    for c in out.values():
        c.flushall()
    yield out
    for c in out.values():
        c.close()


def fleet_env(servers: dict[str, RedisProcess], fake: FakeSlack) -> dict[str, str]:
    return {
        **base_env(servers["orders"].port, fake),
        "LOCKGUARD_SCAN_SCHEDULE": "every 1s",
        "LOCKGUARD_REDIS_TIMEOUT_SECONDS": "1",
    }


def fleet(servers: dict[str, RedisProcess], env: dict[str, str]) -> list[Target]:
    """The four targets, as the targets file would give them (built here: task E loads it)."""
    settings = load_settings(env=env)
    ports = {name: s.port for name, s in servers.items()} | {DEAD: free_port()}
    out = []
    for name in (*LIVE, DEAD):
        update: dict[str, Any] = {"redis_host": "127.0.0.1", "redis_port": ports[name]}
        if name in CHANNELS:
            update["slack_channel"] = CHANNELS[name]
        labels = {"team": "payments"} if name in ("orders", DEAD) else {"team": "platform"}
        out.append(Target(name=name, settings=settings.model_copy(update=update), labels=labels))
    return out


def scans(r: redis.Redis) -> list[dict[str, Any]]:
    """Every scan recorded in this Redis's audit stream."""
    return [json.loads(f[b"data"]) for _, f in r.xrange(AUDIT_STREAM) if f[b"event"] == b"scan"]


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def metrics(url: str) -> Samples:
    reply = get(url + "/metrics")
    assert reply.status == 200
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for f in text_string_to_metric_families(reply.text)
        for s in f.samples
    }


@pytest.fixture
def served(
    servers: dict[str, RedisProcess], clients: dict[str, redis.Redis], slack_fake: FakeSlack
) -> Iterator[Callable[..., serve.Served]]:
    started: list[serve.Served] = []

    def start(repost_every: float = REPOST_EVERY, **env: str) -> serve.Served:
        base = fleet_env(servers, slack_fake) | env
        s = serve.start(
            load_settings(env=base),
            port=0,
            err=io.StringIO(),
            tuning=FAST,
            targets=fleet(servers, base),
            repost_every=repost_every,
        )
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def test_each_target_is_scanned_posted_and_measured_on_its_own(
    served: Callable[..., serve.Served], clients: dict[str, redis.Redis], slack_fake: FakeSlack
) -> None:
    clients["orders"].set(b"lock:stuck", b"tok")  # no expiry: infinite_ttl
    clients["sessions"].set(b"lock:forever", b"tok")
    s = served()
    wait_until(lambda: all(len(scans(clients[n])) >= 2 for n in LIVE), 10)
    assert {json.loads(clients[n].get(LEADER))["replica"] for n in LIVE} == {"replica-a"}

    # findings go to each target's own channel (sessions has none: the default)
    def channels() -> set[str]:
        return {c.body["channel"] for c in slack_fake.calls("chat.postMessage")}

    wait_until(lambda: {"C0ORDERS", "C0ALERTS"} <= channels(), 5)
    assert channels() == {"C0ORDERS", "C0ALERTS"}  # queue is healthy: nothing in C0QUEUE
    # each target's state is in its own Redis: the queue's scans found nothing
    assert all(scan.get("findings", 0) == 0 for scan in scans(clients["queue"]))
    assert not clients["queue"].exists(b"{lockguard}:posted:findings")
    got = metrics(s.url)
    assert all(dict(labels).get("target") for _, labels in got), "every sample names its target"

    def value(name: str, **labels: str) -> float:
        return got[(name, frozenset(labels.items()))]

    for name in LIVE:
        assert value("lockguard_target_up", target=name) == 1
        assert value("lockguard_scheduler_leader", target=name) == 1
    assert value("lockguard_target_up", target=DEAD) == 0
    assert value("lockguard_scheduler_leader", target=DEAD) == 0
    ran = value("lockguard_scans_total", target="orders", trigger="schedule", outcome="findings")
    assert ran >= 2
    assert value("lockguard_scans_total", target="queue", trigger="schedule", outcome="ok") >= 2
    assert value("lockguard_locks", target="orders", verdict="infinite_ttl") == 1
    assert value("lockguard_locks", target="queue", verdict="infinite_ttl") == 0
    # /healthz: 200 while one target is down, naming it
    health = get(s.url + "/healthz")
    assert health.status == 200
    body = health.json()
    assert body["status"] == "degraded"
    assert body["reasons"] == [f"{DEAD}: redis: unreachable"]
    by_name = {t["name"]: t for t in body["targets"]}
    assert list(by_name) == [*LIVE, DEAD]
    assert by_name[DEAD]["up"] is False
    assert by_name[DEAD]["redis"] == "unreachable"
    assert by_name["orders"]["up"] is True
    assert by_name["orders"]["labels"] == {"team": "payments"}
    assert by_name["orders"]["scans"]["last_completed"] is not None
    assert "127.0.0.1" not in health.text  # no address


def test_a_stopped_replica_gives_every_lease_back(
    served: Callable[..., serve.Served], clients: dict[str, redis.Redis]
) -> None:
    s = served()
    wait_until(lambda: all(clients[n].exists(LEADER) for n in LIVE), 5)
    s.stop()
    assert not any(clients[n].exists(LEADER) for n in LIVE)
    assert not any(clients[n].zcard(b"{lockguard}:replicas") for n in LIVE)


def _report(*, up: bool = True, overdue: bool = False) -> HealthReport:
    now = 10_000_000
    if not up:
        return HealthReport("e", redis_error="redis: unreachable", limit_ms=2_000)
    last = now - 5_000 if overdue else now - 100
    return HealthReport("e", checked_ms=now, last_scan_ms=last, started_ms=0, limit_ms=2_000)


@pytest.mark.parametrize(
    ("reports", "code", "status"),
    [
        ([_report(), _report()], 200, "ok"),
        ([_report(), _report(up=False)], 200, "degraded"),
        ([_report(), _report(overdue=True)], 200, "degraded"),
        ([_report(up=False), _report(up=False)], 503, "unhealthy"),
        ([_report(overdue=True), _report(up=False)], 503, "unhealthy"),
    ],
)
def test_healthz_is_503_only_when_lockguard_itself_cannot_work(
    reports: list[HealthReport], code: int, status: str
) -> None:
    got, body = fleet_health([TargetHealth(f"t{i}", {}, r) for i, r in enumerate(reports)])
    assert (got, body["status"]) == (code, status)
    assert len(body["targets"]) == len(reports)
    if status != "ok":
        assert body["reasons"]


def test_a_fleet_of_48_targets_runs_on_bounded_threads(
    servers: dict[str, RedisProcess], clients: dict[str, redis.Redis], slack_fake: FakeSlack
) -> None:
    """48 targets (16 databases on each of the 3 servers), each scanned every second: the
    threads lockguard adds do not grow with the targets (jobs 8, leases 8, checks 8), and every
    target is scanned."""
    env = fleet_env(servers, slack_fake)
    settings = load_settings(env=env)
    targets = [
        Target(
            name=f"t{i}-{db}",
            settings=settings.model_copy(
                update={"redis_url": f"redis://127.0.0.1:{servers[name].port}/{db}"}
            ),
        )
        for i, name in enumerate(LIVE)
        for db in range(16)
    ]
    dbs = [redis.Redis(port=servers[n].port, db=db) for n in LIVE for db in range(16)]
    before = threading.active_count()
    peak = [0]

    def scanned(times: int) -> bool:
        """Every target scanned `times` times, the most threads seen so far noted."""
        peak[0] = max(peak[0], threading.active_count())
        return all(len(scans(r)) >= times for r in dbs)

    s = serve.start(settings, port=0, err=io.StringIO(), tuning=FAST, targets=targets)
    try:
        # Every target scanned twice (waited for): the pools have run all their kinds of work,
        # all 48 targets' over, while the threads were counted (the most at any one time).
        wait_until(lambda: scanned(2), 30)
        added = peak[0] - before
        print(f"48 targets: at most {added} threads added")  # 29 here
        assert added <= 8 + 1 + 8 + 1 + 8 + 1 + 20  # jobs, heartbeat, checks; Slack and HTTP
    finally:
        s.stop()
        for r in dbs:
            r.close()


def test_the_fleet_digest_groups_the_targets_by_team(
    served: Callable[..., serve.Served], clients: dict[str, redis.Redis], slack_fake: FakeSlack
) -> None:
    clients["orders"].set(b"lock:stuck", b"tok")
    started = time.monotonic()
    s = served(LOCKGUARD_DIGEST_SCHEDULE="every 1s")
    assert isinstance(s.ops, FleetOperations)
    wait_until(lambda: all(len(scans(clients[n])) >= 1 for n in LIVE), 10)

    def digests() -> list[Any]:
        return [
            c
            for c in slack_fake.calls("chat.postMessage")
            if str(c.body.get("text", "")).startswith("lockguard digest:")
        ]

    # Two more digests (waited for): the second began after every live target's first scan.
    mark = len(digests())
    wait_until(lambda: len(digests()) >= mark + 2, 10)
    took = time.monotonic() - started
    digest = digests()[-1]
    check_message(digest.body)
    assert digest.body["channel"] == "C0ALERTS"  # LOCKGUARD_SLACK_CHANNEL, not a target's
    assert digest.body["text"].startswith("lockguard digest: 4 targets, 1 flagged locks, 1 down")
    text = json.dumps(digest.body["blocks"])
    payments, platform = text.index("*`payments`*"), text.index("*`platform`*")
    assert payments < text.index("`billing`") < text.index("`orders`") < platform
    assert platform < text.index("`queue`") < text.index("`sessions`")
    assert "1 flagged" in text[text.index("`orders`") :]
    assert "Redis" in text[text.index("`billing`") : text.index("`orders`")]
    # one digest a tick (every 1 s) for the whole fleet, not one per target (4 a tick)
    assert len(digests()) <= took + 1, (len(digests()), took)
    # ... the first target's digest job, which `/lockguard status` shows (it said "off")
    shown = s.ops.home.snapshot()
    assert (shown.digest_schedule, shown.next_digest_ms is not None) == ("every 1s", True)
