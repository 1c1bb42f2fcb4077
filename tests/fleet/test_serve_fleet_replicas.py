"""Two `lockguard serve` replicas (real processes) share a fleet of three live redis-servers and
one whose Redis is down: each takes a share of the targets' leader leases, each target is
scanned once per tick by exactly one replica, and a SIGKILLed replica's targets are taken over
by the other within one lease period. `/metrics` carries `target`; `/healthz` stays 200 with
the dead target named. The mock Slack Web API runs in this process."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis
from prometheus_client.parser import text_string_to_metric_families

from bot.demo.embedded import RedisProcess, free_port
from bot.store.keyspace import AUDIT_STREAM, LEADER
from tests.fleet.conftest import DEAD, LIVE
from tests.fleet.test_serve_fleet import clients as clients  # the fixtures
from tests.ops.test_ops_replicas import ROOT, child_env
from tests.ops.test_ops_replicas import children as children
from tests.ops.test_ops_serve import get, wait_until
from tests.slack_app_harness import base_env
from tests.slack_mock import FakeSlack

LEASE_S = 5  # LOCKGUARD_LEADER_LEASE_SECONDS: its smallest value


def holders(clients: dict[str, redis.Redis]) -> dict[str, int | None]:
    """Live target -> the pid of the replica holding its lease (None: nobody)."""
    out: dict[str, int | None] = {}
    for name in LIVE:
        raw = clients[name].get(LEADER)
        out[name] = int(json.loads(raw)["replica"].rsplit(":", 1)[1]) if raw else None
    return out


def scan_times(r: redis.Redis) -> list[int]:
    """Server time (ms) of every scan this target's audit stream records, in order."""
    return [
        int(json.loads(f[b"data"])["server_time_ms"])
        for _, f in r.xrange(AUDIT_STREAM)
        if f[b"event"] == b"scan"
    ]


def once_per_tick(times: list[int]) -> bool:
    """No two scans of one target within one tick (every 1s): no tick ran on both replicas."""
    return all(later - earlier >= 500 for earlier, later in itertools.pairwise(times))


def replica(env: dict[str, str], err: Path) -> subprocess.Popen[bytes]:
    with err.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.fleet.fleet_replica"],
            cwd=ROOT,
            env={**env, "PORT": str(free_port())},
            stdout=subprocess.DEVNULL,
            stderr=out,
        )


def test_two_replicas_share_the_fleet_and_a_killed_ones_targets_move_within_a_lease(
    servers: dict[str, RedisProcess],
    clients: dict[str, redis.Redis],
    slack_fake: FakeSlack,
    tmp_path: Path,
    children: list[subprocess.Popen[bytes]],
) -> None:
    fleet: list[dict[str, Any]] = [{"name": n, "port": servers[n].port} for n in LIVE]
    fleet.append({"name": DEAD, "port": free_port(), "labels": {"team": "billing"}})
    env = child_env(
        base_env(servers["orders"].port, slack_fake),
        {
            "LOCKGUARD_SCAN_SCHEDULE": "every 1s",
            "LOCKGUARD_LEADER_LEASE_SECONDS": str(LEASE_S),
            "REDIS_TIMEOUT_SECONDS": "1",
            "FLEET_TARGETS": json.dumps(fleet),
        },
    )
    a = replica(env, tmp_path / "a.err")
    children.append(a)
    b = replica(env, tmp_path / "b.err")
    children.append(b)
    # Both take a share: 4 targets, 2 replicas, at most ceil(4/2) = 2 leases each.
    wait_until(lambda: set(holders(clients).values()) == {a.pid, b.pid}, 20)
    shares = holders(clients)
    assert sorted(list(shares.values()).count(p) for p in (a.pid, b.pid)) == [1, 2]
    marks = {n: len(scan_times(clients[n])) for n in LIVE}
    # Three more scans of every target (waited for: a busy machine runs fewer ticks in 3 s than
    # an idle one), each in a tick of its own: scanned, once a tick.
    wait_until(lambda: all(len(scan_times(clients[n])) >= marks[n] + 3 for n in LIVE), 15)
    for name in LIVE:
        times = scan_times(clients[name])[marks[name] :]
        assert once_per_tick(times), (name, times)
    assert holders(clients) == shares  # nothing moved meanwhile
    # SIGKILL A: nothing given back. B takes A's targets within one lease.
    a_targets = [n for n, pid in shares.items() if pid == a.pid]
    os.kill(a.pid, signal.SIGKILL)
    killed = time.monotonic()
    a.wait(10)
    wait_until(lambda: all(holders(clients)[n] == b.pid for n in a_targets), LEASE_S + 2)
    took = time.monotonic() - killed
    print(f"{a_targets} taken over {took:.2f} s after SIGKILL (lease {LEASE_S} s)")
    assert took <= LEASE_S + 0.5, took
    marks = {n: len(scan_times(clients[n])) for n in LIVE}
    # Every target still scanned, now all by B: two more scans each, waited for.
    wait_until(lambda: all(len(scan_times(clients[n])) >= marks[n] + 2 for n in LIVE), 15)
    for name in LIVE:
        assert once_per_tick(scan_times(clients[name])), name  # never twice in one tick
    # B's /metrics and /healthz name every target, the dead one down.
    url = f"http://127.0.0.1:{b_port(tmp_path / 'b.err')}"
    samples = [
        s for f in text_string_to_metric_families(get(url + "/metrics").text) for s in f.samples
    ]
    assert all("target" in s.labels for s in samples)
    up = {s.labels["target"]: s.value for s in samples if s.name == "lockguard_target_up"}
    assert up == {"orders": 1, "queue": 1, "sessions": 1, DEAD: 0}
    leads = {s.labels["target"]: s.value for s in samples if s.name == "lockguard_scheduler_leader"}
    assert leads == {"orders": 1, "queue": 1, "sessions": 1, DEAD: 0}
    health = get(url + "/healthz")
    assert health.status == 200
    assert health.json()["reasons"] == [f"{DEAD}: redis: unreachable"]
    for err in ("a.err", "b.err"):
        assert "Traceback" not in (tmp_path / err).read_text()


def b_port(err: Path) -> int:
    """The port B's start line on stderr names (`... on 127.0.0.1:PORT, ...`)."""
    line = next(x for x in err.read_text().splitlines() if x.startswith("lockguard serve:"))
    return int(line.split(" on 127.0.0.1:", 1)[1].split(",", 1)[0])
