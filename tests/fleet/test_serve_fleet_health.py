"""A fleet's `/healthz` is served from the check loop's last reports: polling it sends nothing to
any target's Redis; each target's entry carries its report's age, and a report older than three
check periods (the loop stuck) counts as down."""

from __future__ import annotations

from collections.abc import Callable

import redis

from bot import serve
from bot.serve.fleet_operations import FleetOperations
from tests.fleet.conftest import DEAD, LIVE
from tests.fleet.test_serve_fleet import clients, served  # noqa: F401  (fixtures)
from tests.ops.test_ops_serve import get, wait_until


def _fleet(s: serve.Served) -> FleetOperations:
    assert isinstance(s.ops, FleetOperations)
    return s.ops


def _pings(r: redis.Redis) -> int:
    stats = r.info("commandstats")
    return int(stats.get("cmdstat_ping", {}).get("calls", 0))


def test_healthz_polled_sends_no_command_to_the_targets(
    served: Callable[..., serve.Served],  # noqa: F811
    clients: dict[str, redis.Redis],  # noqa: F811
) -> None:
    s = served(LOCKGUARD_SCAN_SCHEDULE="off")
    fleet = _fleet(s)
    wait_until(lambda: all(h.report is not None for h in fleet.last_health()), 5)
    fleet.checks.stop()  # the loop's own checks PING each target; polling must add none
    for r in clients.values():
        r.config_resetstat()
    bodies = [get(s.url + "/healthz") for _ in range(25)]
    assert {b.status for b in bodies} == {200}
    assert {r: _pings(clients[r]) for r in LIVE} == dict.fromkeys(LIVE, 0)
    body = bodies[-1].json()
    assert body["status"] == "degraded"
    assert body["reasons"] == [f"{DEAD}: redis: unreachable"]
    by_name = {t["name"]: t for t in body["targets"]}
    assert list(by_name) == [*LIVE, DEAD]
    for name in LIVE:
        entry = by_name[name]
        assert entry["up"] is True
        assert entry["stale"] is False
        assert isinstance(entry["age_seconds"], float)
        assert 0 <= entry["age_seconds"] < 2
        assert entry["scans"]["state"] == "off"
    assert by_name[DEAD]["up"] is False
    assert body["stale_after_seconds"] == 2.0  # 3 x 0.1 s checks, at least 2 s


def test_a_stale_report_counts_as_down(
    served: Callable[..., serve.Served],  # noqa: F811
    clients: dict[str, redis.Redis],  # noqa: F811
) -> None:
    s = served(LOCKGUARD_SCAN_SCHEDULE="off")
    fleet = _fleet(s)
    wait_until(lambda: all(h.report is not None for h in fleet.last_health()), 5)
    fleet.checks.stop()  # the loop is stuck: its reports age
    replies = []

    def stale() -> bool:
        replies.append(get(s.url + "/healthz"))
        return all(entry["stale"] for entry in replies[-1].json()["targets"])

    wait_until(stale, 10)  # polled until it says so (a busy machine may take longer than 2 s)
    reply = replies[-1]
    assert reply.status == 503
    body = reply.json()
    assert body["status"] == "unhealthy"
    assert body["reasons"][0] == "no target has a recent health check"
    for entry in body["targets"]:
        assert entry["stale"] is True
        assert entry["up"] is False
        assert entry["status"] == "unhealthy"
        assert entry["age_seconds"] > 2
        assert entry["reasons"][0].startswith("health check stale: the last was ")
    # /lockguard status says the same: stale targets are down
    lines = fleet.target_lines()
    assert [line.up for line in lines] == [False] * 4
    assert all(line.problem.startswith("health check stale") for line in lines)
    # the loop back: fresh again
    fleet.checks.start()
    wait_until(lambda: get(s.url + "/healthz").status == 200, 5)


def test_before_the_first_check_a_target_is_not_checked_yet(
    served: Callable[..., serve.Served],  # noqa: F811
) -> None:
    s = served(LOCKGUARD_SCAN_SCHEDULE="off")
    fleet = _fleet(s)
    fleet.checks.stop()
    with fleet._last_lock:
        fleet._last.clear()
    reply = get(s.url + "/healthz")
    assert reply.status == 503
    entry = reply.json()["targets"][0]
    assert entry["up"] is False
    assert entry["age_seconds"] is None
    assert entry["reasons"] == ["not checked yet"]
