"""Redis restarted mid-release (real servers, AOF with `appendfsync always`): the approver stops
with one clear line (exit 3), the outcomes recorded before the crash survive it exactly (the
locks they name, and only those, are gone), and `approve --resume` finishes the rest: every lock
released once, none relabelled `already_gone`, and no event sent twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bot.cases.approval import approve
from bot.cases.case import State
from bot.cases.case_store import CaseStore
from bot.demo.embedded import RedisProcess
from bot.store.keyspace import outcomes_key
from tests.cases.test_never_delete import LIVE, scans
from tests.cases.test_reclaim import Listener
from tests.conftest import missing
from tests.core.test_layouts import uuid1_hex
from tests.embedded_cluster import EmbeddedCluster
from tests.killed_approver import ROOT

N = 3_000
_APPROVER = """
import sys
from bot import cli
sys.exit(cli.main(["approve", sys.argv[1], "--by", "ann", "--yes-count", sys.argv[2]]))
"""


def received_until_lost(listener: Listener) -> list[dict[str, bytes]]:
    """What reached the subscriber before its server died (then its connection fails)."""
    events = []
    while True:
        try:
            msg = listener.pubsub.get_message(timeout=0.2)
        except redis.ConnectionError:
            return events
        if msg and msg["type"] == "message":
            events.append(msg)


#: Every acknowledged write kept: the script that deletes a lock and records its outcome is on
#: disk before its reply (and before any PUBLISH it made reaches a subscriber).
AOF = ("--appendonly", "yes", "--appendfsync", "always")


@pytest.fixture
def durable() -> Iterator[RedisProcess]:
    try:
        server = RedisProcess(*AOF)
    except FileNotFoundError:
        missing("redis-server is not installed")
    yield server
    server.stop()


def test_redis_killed_mid_release_then_resume_releases_each_lock_exactly_once(
    durable: RedisProcess,
) -> None:
    r = durable.client()
    old = uuid1_hex(int(r.time()[0]) * 1000 - 7_200_000)  # held 2 h: past the threshold
    with r.pipeline(transaction=False) as pipe:
        for i in range(N):
            pipe.set(f"lock:job:{i}".encode(), old[:-6] + f"{i:06x}".encode())
        pipe.execute()
    ((_, case),) = scans(r, 1)
    assert case is not None
    assert case.lock_count == N
    before = Listener(r)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "LOCKGUARD_DRY_RUN": "false",
        "REDIS_URL": f"redis://127.0.0.1:{durable.port}/0",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", _APPROVER, case.id, str(N)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while r.hlen(outcomes_key(case.id)) < 600:  # more than one batch done, not all
        assert time.monotonic() < deadline, "the approver recorded too little in 30 s"
        assert proc.poll() is None, "the approver finished before Redis could be killed"
        time.sleep(0.005)
    durable.crash()
    events = received_until_lost(before)
    _, stderr = proc.communicate(timeout=60)

    assert proc.returncode == 3  # Redis went away: the last line names it; no traceback
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("lockguard: error: cannot reach Redis at redis://127.0.0.1:")
    assert "Traceback" not in stderr
    assert len(stderr.splitlines()) < 20  # the locks left are one log line, not one each

    durable.restart()  # same port and directory: the AOF is read back
    r = durable.client()
    recorded = r.hlen(outcomes_key(case.id))
    assert 600 <= recorded < N  # what was recorded before the crash survived it
    gone = sum(1 for i in range(N) if not r.exists(f"lock:job:{i}"))
    assert gone == recorded  # exactly the locks the case says were released are gone
    announced = {json.loads(m["data"])["key_hex"] for m in events}
    released = {f"lock:job:{i}".encode().hex() for i in range(N) if not r.exists(f"lock:job:{i}")}
    # Only released locks were announced. Pub/sub keeps nothing: events still on their way
    # when the server died are lost to subscribers (who retry on their own), never re-sent.
    assert announced <= released
    assert len(events) == len(announced)

    after = Listener(r)
    rep = approve(r, case.id, "ann", LIVE, resume=True)
    assert rep.counts == {"released": N}  # none relabelled already_gone
    assert rep.case.state is State.RELEASED
    rest = after.rest()
    assert len(rest) == N - recorded  # one per lock the resume released...
    assert not {e["key_hex"] for e in rest} & released  # ...and none for one released before
    assert not any(r.exists(f"lock:job:{i}") for i in range(N))


def test_a_cluster_primary_killed_mid_release_then_resume_releases_each_lock_exactly_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The same on a 3-primary Redis Cluster: one primary (not the one holding the cases) is
    SIGKILLed mid-release and started again with its AOF and nodes.conf; the release receipts it
    kept next to each lock let `approve --resume` tell released locks from the rest."""
    from tests.test_cli_cases import run

    try:
        c = EmbeddedCluster(3, extra=AOF)
    except FileNotFoundError:
        missing("redis-server or redis-cli is not installed")
    try:
        monkeypatch.chdir(tmp_path)
        for name, value in {
            "REDIS_CLUSTER": "true",
            "REDIS_URL": c.url,
            "LOCKGUARD_DRY_RUN": "false",
        }.items():
            monkeypatch.setenv(name, value)
        rc = c.client()
        keys = [f"lock:cl:{i}".encode() for i in range(N)]
        with rc.pipeline(transaction=False) as pipe:
            for k in keys:
                pipe.set(k, uuid1_hex(int(rc.time()[0]) * 1000 - 7_200_000))  # held 2 h
            pipe.execute()
        code, out = run("scan", "--json")
        assert code == 1, out
        case_id = json.loads(out)["case"]["case_id"]
        victim = next(n for n in c.primaries() if n is not c.owner(b"{lockguard}:cases"))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [sys.executable, "-c", _APPROVER, case_id, str(N)],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while rc.hlen(outcomes_key(case_id)) < 600:
            assert time.monotonic() < deadline, "the approver recorded too little in 60 s"
            assert proc.poll() is None, "the approver finished before the node could be killed"
            time.sleep(0.005)
        victim.crash()
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 3
        last = stderr.strip().splitlines()[-1]  # names the cluster and the node that went away
        assert last.startswith("lockguard: error: cannot reach Redis at redis-cluster://")
        assert f"127.0.0.1:{victim.port}" in last
        assert "Traceback" not in stderr

        victim.restart()  # its AOF and nodes.conf: same id, same slots
        c.wait_ok()
        code, out = run("approve", case_id, "--by", "ann", "--resume")
        assert code == 0, out
        rc = c.client()
        case = CaseStore(rc, retention_ms=3_600_000).get(case_id)
        assert case is not None
        assert case.state is State.RELEASED
        assert case.outcome_counts == {"released": N}  # none relabelled already_gone
        assert not any(rc.exists(k) for k in keys)
    finally:
        c.stop()
