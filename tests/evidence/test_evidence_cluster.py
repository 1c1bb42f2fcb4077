"""Evidence on a real 3-primary Redis Cluster through `lockguard scan --json`: a Redisson lock's
waiters are counted over every primary (plain subscribers wherever they connected, sharded ones on
the channel's slot, the fair-lock queue), a BullMQ queue's backlog is read where each of its keys
lives, and a worker connected to any primary counts; no key's bytes change."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.cluster import RedisCluster
from redis.crc import key_slot

from tests.embedded_cluster import EmbeddedCluster
from tests.evidence.test_evidence import OWNER, WORKER, run

pytestmark = pytest.mark.real
CHANNEL = b"redisson_lock__channel:{lock:settle}"


@pytest.fixture
def others() -> Iterator[list[Any]]:
    made: list[Any] = []
    yield made
    for c in made:
        c.close()


def node_of(cluster: EmbeddedCluster, rc: RedisCluster, key: bytes) -> Any:
    port = rc.get_node_from_key(key).port
    return next(n for n in cluster.primaries() if n.port == port)


def dumps(rc: RedisCluster) -> dict[bytes, Any]:
    keys = rc.scan_iter(count=1000, target_nodes=RedisCluster.PRIMARIES)
    return {k: rc.dump(k) for k in keys if b"lockguard" not in k}


def test_waiters_backlog_and_workers_over_every_primary(
    cluster: EmbeddedCluster,
    rc: RedisCluster,
    others: list[Any],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    rc.hset(b"lock:settle", OWNER, b"1")
    rc.rpush(b"redisson_lock_queue:{lock:settle}", OWNER[:-2] + b"91")
    home = node_of(cluster, rc, CHANNEL)
    for n in cluster.primaries():  # one plain subscriber on each primary
        c = n.client()
        p = c.pubsub()
        others += [p, c]
        p.subscribe(CHANNEL)
        assert p.get_message(timeout=2) is not None
    c = home.client()
    sharded = c.pubsub()
    others += [sharded, c]
    sharded.ssubscribe(CHANNEL)
    assert sharded.get_sharded_message(timeout=2) is not None

    rc.set(b"bull:emails:7:lock", f"{WORKER}:7".encode())
    rc.lpush(b"bull:emails:wait", b"1", b"2")
    rc.lpush(b"bull:emails:paused", b"3")
    rc.zadd(b"bull:emails:prioritized", {b"4": 1.0})
    assert len({key_slot(k) for k in (b"bull:emails:wait", b"bull:emails:paused")}) == 2
    rc.set(b"bull:reports:9:lock", f"{WORKER}:9".encode())
    far = next(n for n in cluster.primaries() if n.port != home.port)
    worker = far.client()
    others.append(worker)
    worker.client_setname(b"bull:" + base64.b64encode(b"reports"))

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REDIS_CLUSTER", "true")
    monkeypatch.setenv("REDIS_URL", cluster.url)
    monkeypatch.setenv("LOCKGUARD_LOCK_PATTERNS", "lock:*,bull:*:lock")
    before = dumps(rc)
    code, out = run("scan", "--json")
    assert code == 1, out
    found = {f["key"]: f["impact"] for f in json.loads(out)["findings"]}
    assert found["lock:settle"]["waiters"] == len(cluster.primaries()) + 1 + 1
    assert found["bull:emails:7:lock"]["backlog"] == 4
    assert found["bull:emails:7:lock"]["owner_alive"] is False
    assert found["bull:reports:9:lock"]["owner_alive"] is True
    assert dumps(rc) == before
    code, table = run("scan")
    assert code == 1, table
    # the release script's PUBLISH reaches the plain subscribers, the fair wake-up (PUBLISH and
    # SPUBLISH) the queue's head (no deadline); the lock channel's sharded subscriber is not
    # reached (the release script PUBLISHes only)
    assert "releasing wakes 4 waiters; 1 more retries on its own schedule" in table
    assert dumps(rc) == before
