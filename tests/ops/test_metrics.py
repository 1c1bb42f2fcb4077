"""bot.ops.metrics: the DESIGN §6 names and labels, fed from real scans, read back with
prometheus_client's own parser, and served by `GET /metrics` as `serve` serves them: one
target's `Metrics` (`default`, no targets file) in a `FleetMetrics`, each scrape refreshed from
its Redis."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from bot.cases.case import State
from bot.cases.reclaim_config import ReclaimConfig
from bot.compose import build_engine, secrets_of
from bot.config import load_settings
from bot.core.errors import ConfigError
from bot.core.model import Reason
from bot.core.rules import Policy
from bot.engine import TRIGGERS, Engine
from bot.ops.http_server import HttpServer, Route
from bot.ops.metrics import (
    CONTENT_TYPE,
    FleetMetrics,
    Metrics,
    metrics_route,
    refresh_last_scan,
)
from bot.release import Outcome
from bot.scan.result import ScanOptions

POLICY = Policy(stale_threshold_ms=30_000)
FAMILIES = {
    "lockguard_scans": ("counter", {"trigger", "outcome"}),
    "lockguard_last_scan_success_timestamp_seconds": ("gauge", set()),
    "lockguard_scan_duration_seconds": ("histogram", set()),
    "lockguard_locks": ("gauge", {"verdict"}),
    "lockguard_oldest_lock_age_seconds": ("gauge", set()),
    "lockguard_cases": ("gauge", {"state"}),
    "lockguard_releases": ("counter", {"outcome"}),
    "lockguard_scheduler_leader": ("gauge", set()),
    "lockguard_oldest_pending_case_age_seconds": ("gauge", set()),
    "lockguard_scans_overdue": ("gauge", set()),
    "lockguard_target_up": ("gauge", set()),
}
#: The implicit target's name (no targets file): every sample carries it.
DEFAULT = "default"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def engine(client: redis.Redis, endpoint: str = "redis://test:1/0") -> Engine:
    return Engine(
        client, ScanOptions([b"lock:*"], POLICY), ReclaimConfig(policy=POLICY), endpoint=endpoint
    )


def render(metrics: Metrics) -> str:
    """What `/metrics` shows of one target (`serve` without a targets file)."""
    body, content_type = FleetMetrics([metrics]).render()
    assert content_type == CONTENT_TYPE
    return body.decode()


def parse(text: str) -> tuple[dict[str, str], Samples]:
    """(family name -> type, (sample name, labels but `target`) -> value), checking every label
    set, `target` included."""
    types: dict[str, str] = {}
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        wanted = FAMILIES[family.name][1]
        for s in family.samples:
            assert set(s.labels) - {"le"} == wanted | {"target"}, (s.name, s.labels)
            assert s.labels["target"] == DEFAULT
            labels = {k: v for k, v in s.labels.items() if k != "target"}
            samples[(s.name, frozenset(labels.items()))] = s.value
    return types, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def test_names_labels_and_values_after_real_scans(r: redis.Redis) -> None:
    # No TTL, and (ShedLock's value) taken long ago: infinite_ttl findings, releasable at once.
    r.set(b"lock:forever-1", b"ADDED:2025-12-31T23:00:00.250Z@host-1")
    r.set(b"lock:forever-2", b"ADDED:2025-12-31T23:00:00.250Z@host-2")
    r.set(b"lock:fine", b"tok-3", px=60_000)  # healthy
    r.rpush(b"lock:queue", b"x")  # not a lock layout
    e = engine(r)
    metrics = Metrics(DEFAULT)
    result, case = e.scan("schedule")
    metrics.scan_done("schedule", result)
    r.delete(b"lock:forever-1", b"lock:forever-2")
    clean, _ = e.scan("webhook")
    metrics.scan_done("webhook", clean)
    metrics.scan_failed("webhook")
    metrics.scan_failed("slash")
    metrics.cases(e.cases(200), e.now_ms())
    metrics.releases({"released": 2, "error": 1})
    metrics.releases({"released": 1})
    metrics.leader(True)

    types, samples = parse(render(metrics))
    assert types == {name: kind for name, (kind, _) in FAMILIES.items()}
    assert not [name for name, _ in samples if name.endswith("_created")]

    for trigger in TRIGGERS:  # every trigger and outcome is listed, 0 included
        for outcome in ("ok", "findings", "failed"):
            expected = {
                ("schedule", "findings"): 1,
                ("webhook", "ok"): 1,
                ("webhook", "failed"): 1,
                ("slash", "failed"): 1,
            }.get((trigger, outcome), 0)
            assert (
                value(samples, "lockguard_scans_total", trigger=trigger, outcome=outcome)
                == expected
            )
    # The gauges are the last completed scan's: the clean one.
    assert (
        value(samples, "lockguard_last_scan_success_timestamp_seconds")
        == clean.server_time_ms / 1000
    )
    assert value(samples, "lockguard_locks", verdict="healthy") == 1
    assert value(samples, "lockguard_locks", verdict="not_a_lock") == 1
    assert value(samples, "lockguard_locks", verdict="infinite_ttl") == 0
    assert {labels for name, labels in samples if name == "lockguard_locks"} == {
        frozenset({("verdict", r_.value)}) for r_ in Reason
    }
    assert value(samples, "lockguard_oldest_lock_age_seconds") == pytest.approx(
        clean.oldest_held_seconds
    )
    assert value(samples, "lockguard_scan_duration_seconds_count") == 2
    assert value(samples, "lockguard_scan_duration_seconds_bucket", le="+Inf") == 2
    assert value(samples, "lockguard_scan_duration_seconds_sum") == pytest.approx(
        result.duration_seconds + clean.duration_seconds
    )
    assert case is not None  # auto-remediation proposed the two no-TTL locks
    for state in State:
        assert value(samples, "lockguard_cases", state=state.value) == (
            1 if state is State.PENDING else 0
        )
    assert value(samples, "lockguard_releases_total", outcome="released") == 3
    assert value(samples, "lockguard_releases_total", outcome="error") == 1
    for outcome in Outcome:
        assert ("lockguard_releases_total", frozenset({("outcome", outcome.value)})) in samples
    assert value(samples, "lockguard_scheduler_leader") == 1
    assert value(samples, "lockguard_scans_overdue") == 0
    assert value(samples, "lockguard_target_up") == 0  # no health check yet
    metrics.target_up(True)
    assert value(parse(render(metrics))[1], "lockguard_target_up") == 1


def test_the_oldest_pending_case_s_wait_and_scans_overdue(r: redis.Redis) -> None:
    r.set(b"lock:forever", b"ADDED:2025-12-31T23:00:00.250Z@host-1")
    e = engine(r)
    _, case = e.scan("schedule")
    assert case is not None
    metrics = Metrics(DEFAULT)
    metrics.cases(e.cases(200), case.created_ms + 90_000)
    metrics.scans_overdue(True)
    _, samples = parse(render(metrics))
    assert value(samples, "lockguard_oldest_pending_case_age_seconds") == 90
    assert value(samples, "lockguard_scans_overdue") == 1
    metrics.cases([], case.created_ms + 90_000)  # none pending: 0, not the last wait
    metrics.scans_overdue(False)
    _, samples = parse(render(metrics))
    assert value(samples, "lockguard_oldest_pending_case_age_seconds") == 0
    assert value(samples, "lockguard_scans_overdue") == 0


def test_the_first_scan_sets_the_gauges_and_an_older_summary_does_not_win(r: redis.Redis) -> None:
    r.set(b"lock:a", b"t")
    metrics = Metrics(DEFAULT)
    result, _ = engine(r).scan("cli", propose=False)
    metrics.scan_done("cli", result)
    older = {
        **result.summary(),
        "server_time_ms": result.server_time_ms - 1,
        "by_reason": {"healthy": 99},
    }
    metrics.last_scan(older)
    metrics.last_scan(None)
    _, samples = parse(render(metrics))
    assert value(samples, "lockguard_locks", verdict="infinite_ttl") == 1
    assert value(samples, "lockguard_locks", verdict="healthy") == 0
    assert value(samples, "lockguard_scans_total", trigger="cli", outcome="findings") == 1


def test_two_metrics_objects_do_not_share_a_registry() -> None:
    a, b = Metrics(DEFAULT), Metrics(DEFAULT)
    a.leader(True)
    shown_a, shown_b = FleetMetrics([a]), FleetMetrics([b])
    assert shown_a.registry is not shown_b.registry
    assert value(parse(shown_b.render()[0].decode())[1], "lockguard_scheduler_leader") == 0


def route(metrics: Metrics, e: Engine, **kwargs: str | None) -> Route:
    """`GET /metrics` as `serve` builds it for one target."""
    return metrics_route(FleetMetrics([metrics]), lambda: refresh_last_scan(metrics, e), **kwargs)


@pytest.fixture
def served(real_redis: redis.Redis) -> Iterator[tuple[HttpServer, Metrics, Engine]]:
    e = engine(real_redis)
    metrics = Metrics(DEFAULT)
    server = HttpServer("127.0.0.1", 0, [route(metrics, e)])
    server.start()
    yield server, metrics, e
    server.stop()


def get(
    server: HttpServer, path: str = "/metrics", headers: dict[str, str] | None = None
) -> tuple[int, str, str]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type") or "", resp.read().decode()
    finally:
        conn.close()


def test_route_serves_the_last_scan_any_replica_ran(
    served: tuple[HttpServer, Metrics, Engine], real_redis: redis.Redis
) -> None:
    server, _, _ = served
    status, content_type, text = get(server)
    assert (status, content_type) == (200, CONTENT_TYPE)
    assert value(parse(text)[1], "lockguard_last_scan_success_timestamp_seconds") == 0
    real_redis.set(b"lock:x", b"t")
    other_replica = engine(real_redis)
    result, _ = other_replica.scan("schedule", propose=False)  # not this process's Metrics
    _, _, text = get(server)
    _, samples = parse(text)
    assert (
        value(samples, "lockguard_last_scan_success_timestamp_seconds")
        == result.server_time_ms / 1000
    )
    assert value(samples, "lockguard_locks", verdict="infinite_ttl") == 1
    assert value(samples, "lockguard_scans_total", trigger="schedule", outcome="findings") == 0


def test_route_still_answers_when_redis_is_down(closed_port: int) -> None:
    down = build_engine(
        load_settings(
            {
                "REDIS_URL": f"redis://127.0.0.1:{closed_port}/0",
                "LOCKGUARD_REDIS_TIMEOUT_SECONDS": "1",
            }
        )
    )
    metrics = Metrics(DEFAULT)
    metrics.leader(True)
    with HttpServer("127.0.0.1", 0, [route(metrics, down)]) as server:
        status, _, text = get(server)
    assert status == 200
    assert value(parse(text)[1], "lockguard_scheduler_leader") == 1


TOKEN = "mt-Token-0123456789abcdef"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer wrong-token-0123456789"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Bearer {TOKEN[:-1]}"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
        {"X-Lockguard-Key": TOKEN},  # the webhook's header is not the metrics' one
    ],
)
def test_with_a_token_a_scrape_without_it_is_401_and_sees_no_metric(
    real_redis: redis.Redis, headers: dict[str, str]
) -> None:
    refreshed: list[None] = []
    guarded = metrics_route(
        FleetMetrics([Metrics(DEFAULT)]), lambda: refreshed.append(None), token=TOKEN
    )
    with HttpServer("127.0.0.1", 0, [guarded]) as server:
        status, content_type, text = get(server, headers=headers)
    assert status == 401
    assert refreshed == []  # Redis is not even read
    assert content_type.startswith("application/json")
    assert json.loads(text) == {"error": "unauthorized"}
    assert "lockguard_" not in text
    assert TOKEN not in text


@pytest.mark.parametrize("header", [f"Bearer {TOKEN}", f"bearer   {TOKEN} "])
def test_with_the_token_the_scrape_is_served(real_redis: redis.Redis, header: str) -> None:
    metrics = Metrics(DEFAULT)
    metrics.leader(True)
    with HttpServer("127.0.0.1", 0, [route(metrics, engine(real_redis), token=TOKEN)]) as server:
        status, content_type, text = get(server, headers={"Authorization": header})
        no_token = get(server)[0]
    assert (status, content_type) == (200, CONTENT_TYPE)
    assert value(parse(text)[1], "lockguard_scheduler_leader") == 1
    assert no_token == 401


def test_without_a_token_metrics_are_open(real_redis: redis.Redis) -> None:
    for token in (None, ""):
        with HttpServer(
            "127.0.0.1", 0, [route(Metrics(DEFAULT), engine(real_redis), token=token)]
        ) as server:
            assert get(server)[0] == 200
            assert get(server, headers={"Authorization": "Bearer anything"})[0] == 200


def test_the_metrics_token_setting_is_a_secret() -> None:
    settings = load_settings({"LOCKGUARD_METRICS_TOKEN": f"  {TOKEN} "}, env_file=None)
    assert settings.metrics_token is not None
    assert settings.metrics_token.get_secret_value() == TOKEN
    assert TOKEN in secrets_of(settings)  # scrubbed from every log line
    assert TOKEN not in repr(settings)
    assert load_settings({"LOCKGUARD_METRICS_TOKEN": " "}, env_file=None).metrics_token is None
    with pytest.raises(ConfigError) as info:
        load_settings({"LOCKGUARD_METRICS_TOKEN": "short-Secret"}, env_file=None)
    assert "LOCKGUARD_METRICS_TOKEN" in str(info.value)
    assert "short-Secret" not in str(info.value)
