"""Evidence on a real redis-server, through `lockguard scan --json` and the table: waiters are
separate connections really subscribed to a Redisson lock's channel, a fair lock's queue is a
real list, a BullMQ queue's backlog is its real wait/paused/prioritized keys and its workers are
connections named as BullMQ names them; the numbers are exact, the order is by impact, a user who
may not run CLIENT gets `owner_alive` null with the reason, and no byte of any key changes."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.conftest import RedisServer
from tests.test_cli_scan_notes import run

OWNER = b"6f1c2c1e-6f3a-4a5b-9c1d-2b3c4d5e6f70:87"
WORKER = "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"
PATTERNS = "lock:*,bull:*:lock"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, real_redis: redis.Redis) -> redis.Redis:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REDIS_HOST", "127.0.0.1")
    monkeypatch.setenv("REDIS_PORT", str(real_redis.connection_pool.connection_kwargs["port"]))
    monkeypatch.setenv("LOCKGUARD_LOCK_PATTERNS", PATTERNS)
    return real_redis


@pytest.fixture
def others(redis_server: RedisServer) -> Iterator[list[Any]]:
    """Connections of other processes (waiters, workers), closed after the test."""
    made: list[Any] = []
    yield made
    for c in made:
        c.close()


def scan_json() -> dict[str, Any]:
    code, out = run("scan", "--json")
    assert code == 1
    doc: dict[str, Any] = json.loads(out)
    return doc


def by_key(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["key"]: f for f in doc["findings"]}


def subscribe(server: RedisServer, others: list[Any], channel: bytes, n: int) -> None:
    """`n` separate connections subscribed to `channel`, as `n` waiting Redisson clients are."""
    for _ in range(n):
        c = server.client()
        others.append(c)
        p = c.pubsub()
        others.append(p)  # kept: a collected PubSub closes its connection
        p.subscribe(channel)
        assert p.get_message(timeout=2) is not None  # the subscribe confirmation


def worker_connection(server: RedisServer, others: list[Any], name: bytes) -> None:
    c = server.client()
    others.append(c)
    c.client_setname(name)


def dumps(client: redis.Redis) -> dict[bytes, bytes | None]:
    """Every key but lockguard's own, with its exact serialized bytes."""
    return {k: client.dump(k) for k in client.scan_iter(count=1000) if b"lockguard" not in k}


def plant_redisson(client: redis.Redis, name: bytes) -> None:
    client.hset(name, OWNER, b"1")  # no TTL: its watchdog died with its JVM


def plant_bull(
    client: redis.Redis, queue: bytes, job: int, *, wait: int, paused: int, prio: int
) -> None:
    """A BullMQ-layout job lock (no TTL, so the first scan flags it) and its queue's work."""
    q = b"bull:" + queue
    client.set(q + b":" + str(job).encode() + b":lock", f"{WORKER}:{job}".encode())
    for i in range(wait):
        client.lpush(q + b":wait", str(100 + i).encode())
    for i in range(paused):
        client.lpush(q + b":paused", str(200 + i).encode())
    for i in range(prio):
        client.zadd(q + b":prioritized", {str(300 + i).encode(): (1 << 32) + i})


def test_redisson_waiters_are_the_channel_subscribers_exactly_and_rank_first(
    env: redis.Redis, redis_server: RedisServer, others: list[Any]
) -> None:
    plant_redisson(env, b"lock:settle")
    plant_redisson(env, b"lock:quiet")
    env.set(b"lock:old", b"tok")  # another abandoned lock, nobody waits
    subscribe(redis_server, others, b"redisson_lock__channel:{lock:settle}", 5)
    before = dumps(env)
    doc = scan_json()
    found = by_key(doc)
    assert found["lock:settle"]["impact"]["waiters"] == 5
    assert found["lock:quiet"]["impact"]["waiters"] == 0
    assert found["lock:old"]["impact"]["waiters"] is None  # a string lock: Redis cannot tell
    assert doc["findings"][0]["key"] == "lock:settle"
    scores = [f["impact"]["score"] for f in doc["findings"]]
    assert scores == sorted(scores, reverse=True)
    assert dumps(env) == before
    code, table = run("scan")
    assert code == 1
    rows = [line for line in table.splitlines() if line.startswith("infinite_ttl")]
    assert "lock:settle" in rows[0]
    assert "5 waiting" in rows[0]
    assert "releasing wakes 5 waiters" in rows[0]  # Redisson's unlock message on that channel


def test_a_fair_lock_counts_its_queue(
    env: redis.Redis, redis_server: RedisServer, others: list[Any]
) -> None:
    plant_redisson(env, b"lock:fair")
    queue = b"redisson_lock_queue:{lock:fair}"
    waiting = [b"6f1c2c1e-6f3a-4a5b-9c1d-2b3c4d5e6f70:%d" % t for t in (91, 92, 93)]
    env.rpush(queue, *waiting)
    env.zadd(b"redisson_lock_timeout:{lock:fair}", dict.fromkeys(waiting, 1000000000000.0))
    before = dumps(env)
    found = by_key(scan_json())
    assert found["lock:fair"]["impact"]["waiters"] == 3
    assert dumps(env) == before
    # every queued thread's deadline (2001) has passed: the release's fair-lock wake-up skips
    # them all, and none listens on the lock's channel (tests/release/test_fair_wake.py: a
    # live head is counted as woken)
    code, table = run("scan")
    assert code == 1
    assert "releasing wakes no one: 3 waiters retry on their own schedule" in table


def test_bullmq_backlog_and_owner_liveness(
    env: redis.Redis, redis_server: RedisServer, others: list[Any]
) -> None:
    plant_bull(env, b"emails", 7, wait=4, paused=2, prio=3)  # its worker was SIGKILLed
    plant_bull(env, b"reports", 9, wait=1, paused=0, prio=0)  # its worker is connected
    worker_connection(redis_server, others, b"bull:" + base64.b64encode(b"reports") + b":w:r1")
    # a connection of another queue's worker proves nothing about `emails`
    worker_connection(redis_server, others, b"bull:" + base64.b64encode(b"emailsx"))
    before = dumps(env)
    doc = scan_json()
    found = by_key(doc)
    dead, live = found["bull:emails:7:lock"]["impact"], found["bull:reports:9:lock"]["impact"]
    assert dead["backlog"] == 9
    assert dead["owner_alive"] is False
    assert dead["owner_evidence"] == "no worker connected to queue `emails`"
    assert live["backlog"] == 1
    assert live["owner_alive"] is True
    assert live["owner_evidence"] == "1 worker connection for queue `reports`"
    assert [f["key"] for f in doc["findings"]][:2] == ["bull:emails:7:lock", "bull:reports:9:lock"]
    assert dumps(env) == before
    code, table = run("scan")
    assert code == 1
    assert "9 queued · owner gone: no worker connected to queue `emails`" in table
    assert "lockguard wakes no one: workers retry on their own schedule" in table


def test_a_user_who_may_not_run_client_gets_owner_alive_null_with_the_reason(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    env.execute_command(
        "ACL",
        "SETUSER",
        "noclient",
        "on",
        ">pw-noclient-long-enough",
        "~*",
        "&*",
        "+@all",
        "-client",
    )
    plant_bull(env, b"emails", 7, wait=2, paused=0, prio=0)
    port = env.connection_pool.connection_kwargs["port"]
    monkeypatch.setenv("REDIS_URL", f"redis://noclient:pw-noclient-long-enough@127.0.0.1:{port}/0")
    try:
        impact = by_key(scan_json())["bull:emails:7:lock"]["impact"]
    finally:
        env.execute_command("ACL", "DELUSER", "noclient")
    assert impact["owner_alive"] is None
    assert impact["owner_evidence"] == "CLIENT LIST refused: this Redis user may not run it (ACL)"
    assert impact["backlog"] == 2  # the scan and the other reads went on


def test_json_lists_findings_beyond_the_examined_ones_by_score_too(env: redis.Redis) -> None:
    now = int(time.time())
    for i in range(205):
        env.set(f"lock:n{i:03d}".encode(), b"tok-%d" % (now + i))
    doc = scan_json()
    assert len(doc["findings"]) == 205
    scores = [f["impact"]["score"] for f in doc["findings"]]
    assert scores == sorted(scores, reverse=True)
    assert len({f["key"] for f in doc["findings"]}) == 205
    tail = doc["findings"][-1]["impact"]
    assert tail["owner_evidence"].startswith("not read: only the worst findings")
