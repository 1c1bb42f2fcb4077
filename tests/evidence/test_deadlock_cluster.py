"""A deadlock across the primaries of a real 3-primary Redis Cluster: Redisson's hash tag puts
each lock's queue and timeouts in the lock's slot, so the two locks of the cycle, on different
primaries, are read each on its own node, and the cycle is found once all are read; one finding,
no byte of any key changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from redis.cluster import RedisCluster

from tests.embedded_cluster import EmbeddedCluster
from tests.evidence.test_deadlock import WAIT_MS, A, B
from tests.evidence.test_evidence_cluster import dumps
from tests.test_cli_scan_notes import run

pytestmark = pytest.mark.real


def test_a_cycle_across_primaries_is_one_deadlock(
    cluster: EmbeddedCluster, rc: RedisCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    one = b"lock:a"
    home = rc.get_node_from_key(one).port
    other = next(
        k for k in (b"lock:%c" % c for c in b"bcdefgh") if rc.get_node_from_key(k).port != home
    )
    s, us = rc.time()
    deadline = int(s) * 1000 + int(us) // 1000 + 30_000 + WAIT_MS
    for name, holder, waiter in ((one, A, B), (other, B, A)):
        rc.hset(name, holder, b"1")
        rc.pexpire(name, 30_000)
        rc.zadd(b"redisson_lock_timeout:{" + name + b"}", {waiter: deadline})
        rc.rpush(b"redisson_lock_queue:{" + name + b"}", waiter)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REDIS_CLUSTER", "true")
    monkeypatch.setenv("REDIS_URL", cluster.url)
    monkeypatch.setenv("LOCKGUARD_LOCK_PATTERNS", "lock:*")
    before = dumps(rc)
    code, out = run("scan", "--json")
    assert code == 1, out
    doc = json.loads(out)
    found = [f for f in doc["findings"] if f["reason"] == "deadlock"]
    assert len(found) == 1
    assert [(x["key"], x["holder"]) for x in found[0]["cycle"]] == [
        ("lock:a", A.decode()),
        (other.decode(), B.decode()),
    ]
    assert dumps(rc) == before
    # approved, the cycle is read again across the primaries and only the proposed lock goes
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
    code, text = run("approve", doc["case"]["case_id"], "--by", "ann")
    assert code == 0, text
    assert "1 of 1 lock(s) released" in text
    after = dumps(rc)
    assert after == {k: v for k, v in before.items() if k != b"lock:a"}
