"""Redis restarted mid-release (real servers, AOF with `appendfsync always`): the approver stops
with one clear line (exit 3), the outcomes recorded before the crash survive it exactly (the
locks they name, and only those, are gone), and `approve --resume` finishes the rest: every lock
released once, none relabelled `already_gone`, and no event sent twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import pytest
import redis

from bot.cases import State
from bot.embedded import RedisProcess
from bot.keyspace import outcomes_key
from bot.reclaim import approve
from tests.killed_approver import ROOT
from tests.test_layouts import uuid1_hex
from tests.test_never_delete import LIVE, scans
from tests.test_reclaim import Listener

N = 3_000
_APPROVER = """
import sys
from bot import cli
sys.exit(cli.main(["approve", sys.argv[1], "--by", "ann"]))
"""


class Durable:
    """A redis-server that keeps every acknowledged write (AOF, fsync always) in a directory of
    its own, so that it can be killed and started again on the same port with its data."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="lockguard-aof-")
        self.server = self._start(None)

    def _start(self, port: int | None) -> RedisProcess:
        return RedisProcess("--appendonly", "yes", "--appendfsync", "always", "--dir", self.dir,
                            port=port)

    def crash(self) -> None:
        self.server.proc.kill()  # SIGKILL: no shutdown save, only what the AOF already has
        self.server.proc.wait(10)

    def restart(self) -> None:
        self.server = self._start(self.server.port)


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


@pytest.fixture
def durable() -> Iterator[Durable]:
    try:
        d = Durable()
    except FileNotFoundError:
        pytest.skip("redis-server is not installed")
    yield d
    d.server.stop()


def test_redis_killed_mid_release_then_resume_releases_each_lock_exactly_once(
        durable: Durable) -> None:
    r = durable.server.client()
    old = uuid1_hex(int(r.time()[0]) * 1000 - 7_200_000)  # held 2 h: past the threshold
    with r.pipeline(transaction=False) as pipe:
        for i in range(N):
            pipe.set(f"lock:job:{i}".encode(), old[:-6] + f"{i:06x}".encode())
        pipe.execute()
    (_, case), = scans(r, 1)
    assert case is not None
    assert case.lock_count == N
    before = Listener(r)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LOCKGUARD_DRY_RUN": "false",
           "REDIS_URL": f"redis://127.0.0.1:{durable.server.port}/0"}
    proc = subprocess.Popen([sys.executable, "-c", _APPROVER, case.id], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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

    durable.restart()
    r = durable.server.client()
    recorded = r.hlen(outcomes_key(case.id))
    assert 600 <= recorded < N  # what was recorded before the crash survived it
    gone = sum(1 for i in range(N) if not r.exists(f"lock:job:{i}"))
    assert gone == recorded  # exactly the locks the case says were released are gone
    announced = {json.loads(m["data"])["key_hex"] for m in events}
    released = {f"lock:job:{i}".encode().hex() for i in range(N)
                if not r.exists(f"lock:job:{i}")}
    # Only released locks were announced. Pub/sub keeps nothing: events still on their way
    # when the server died are lost to subscribers (who retry on their own), never re-sent.
    assert announced <= released
    assert len(events) == len(announced)

    after = Listener(r)
    rep = approve(r, case.id, "ann", LIVE, resume=True)
    assert rep.counts == {"released": N}  # none relabelled already_gone
    assert rep.case.state is State.RELEASED
    rest = after.drain(1.5)
    assert len(rest) == N - recorded  # one per lock the resume released...
    assert not {e["key_hex"] for e in rest} & released  # ...and none for one released before
    assert not any(r.exists(f"lock:job:{i}") for i in range(N))
