"""Several `lockguard serve` replicas on one Redis: each scheduled tick runs once, not once per
replica; a SIGKILLed leader is replaced within one lease; a release cut short by SIGKILL is
finished by the next replica to lead, with no lock released twice and its Slack message
updated. Real processes (`python -m bot serve`, `lockguard approve`) killed with SIGKILL, a real
redis-server, the mock Slack Web API."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from bot.demo.embedded import free_port
from bot.serve.operations import Tuning
from bot.slack.blocks import ids
from bot.store.keyspace import LEADER, case_key, outcomes_key, slack_message_key
from tests.cases.test_reclaim import Listener
from tests.core.test_layouts import uuid1_hex
from tests.killed_approver import kill_mid_release
from tests.ops.test_ops_serve import metrics, scans_recorded, status_text, wait_until
from tests.slack_app_harness import ALERTS, SECRET, Factory, base_env, buttons
from tests.slack_app_harness import slack_app as slack_app  # the fixture
from tests.slack_mock import FakeSlack
from tests.slack_requests import block_action, slash_command, view_submission

ROOT = Path(__file__).resolve().parents[2]
LEASE_S = 5  # LOCKGUARD_LEADER_LEASE_SECONDS: its smallest value
SCHEDULE = {"LOCKGUARD_SCAN_SCHEDULE": "every 1s", "LOCKGUARD_LEADER_LEASE_SECONDS": str(LEASE_S)}
_PROXIES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")


def child_env(*layers: dict[str, str]) -> dict[str, str]:
    """This environment without proxies, then each layer on top (later ones win)."""
    env = {k: v for k, v in os.environ.items() if k not in _PROXIES}
    env["PYTHONPATH"] = str(ROOT)
    for layer in layers:
        env.update(layer)
    return env


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def start_serve(
    env: dict[str, str], err_path: Path, children: list[subprocess.Popen[bytes]]
) -> subprocess.Popen[bytes]:
    """A real `lockguard serve` process with `env`, its stderr in `err_path`."""
    with err_path.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    children.append(proc)
    return proc


def plant_jobs(r: redis.Redis, n: int) -> None:
    """`n` redis-py locks `lock:job:<i>` taken 2 h ago, each with its own token."""
    old = uuid1_hex(int(r.time()[0]) * 1000 - 7_200_000)
    with r.pipeline(transaction=False) as pipe:
        for i in range(n):
            pipe.set(f"lock:job:{i}".encode(), old[:-6] + f"{i:06x}".encode())
        pipe.execute()


def scan_times(r: redis.Redis) -> list[int]:
    """The server time (ms) of every scan recorded in the audit stream, in order."""
    return [
        int(json.loads(f[b"data"])["server_time_ms"])
        for _, f in r.xrange(b"{lockguard}:audit")
        if f[b"event"] == b"scan"
    ]


def holder(r: redis.Redis) -> str | None:
    raw = r.get(LEADER)
    return str(json.loads(raw)["replica"]) if raw else None


def test_two_serves_scan_once_per_tick_and_a_sigkilled_leader_is_replaced_within_a_lease(
    slack_app: Factory,
    slack_fake: FakeSlack,
    redis_server: Any,
    real_redis: redis.Redis,
    tmp_path: Path,
    children: list[subprocess.Popen[bytes]],
) -> None:
    # Replica A: a real `lockguard serve` process, which takes the lease first.
    env = child_env(base_env(redis_server.port, slack_fake), SCHEDULE, {"PORT": str(free_port())})
    a = start_serve(env, tmp_path / "a.err", children)
    wait_until(
        lambda: holder(real_redis) is not None and holder(real_redis).endswith(f":{a.pid}"), 15
    )  # type: ignore[union-attr]
    # Replica B: in this process, its own Engine and client.
    b = slack_app(tuning=Tuning(replica="replica-b"), **SCHEDULE)
    ops = b.served.ops.home
    t0 = time.monotonic()
    wait_until(lambda: time.monotonic() - t0 > 3.2, 5)
    assert not ops.scheduler.is_leader
    got = metrics(b)
    assert got[("lockguard_scheduler_leader", ())] == 0
    assert got[("lockguard_scans_total", (("outcome", "ok"), ("trigger", "schedule")))] == 0
    ran_on_a = scan_times(real_redis)
    assert 2 <= len(ran_on_a) <= 6, ran_on_a  # ~one a second since A started
    follower = status_text(b, "follower")
    assert f":{a.pid}`; this is `replica-b`" in follower  # the holder is A, and we are not it
    assert "(this replica)" not in follower
    # SIGKILL A: no release, no goodbye. B takes over within one lease.
    os.kill(a.pid, signal.SIGKILL)
    killed = time.monotonic()
    a.wait(10)
    before_kill = scan_times(real_redis)  # A's, one more may have ended since the look above
    wait_until(lambda: ops.scheduler.is_leader, LEASE_S + 1.0)
    took = time.monotonic() - killed
    assert took <= LEASE_S + 0.3, took
    assert holder(real_redis) == "replica-b"
    wait_until(lambda: len(scan_times(real_redis)) >= len(before_kill) + 2, 3)
    times = scan_times(real_redis)
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert min(gaps) >= 300, times  # one scan a tick: no tick ran on both replicas
    got = metrics(b)
    assert got[("lockguard_scheduler_leader", ())] == 1
    ran_here = got[("lockguard_scans_total", (("outcome", "ok"), ("trigger", "schedule")))]
    assert ran_here == len(scan_times(real_redis)) - len(before_kill) >= 2
    assert "`replica-b` (this replica)" in status_text(b, "leader")
    assert "Traceback" not in (tmp_path / "a.err").read_text()


def test_a_release_cut_short_by_sigkill_is_finished_by_the_next_leader_and_shown(
    slack_app: Factory,
    redis_server: Any,
    real_redis: redis.Redis,
    children: list[subprocess.Popen[bytes]],
) -> None:
    n = 3_000
    plant_jobs(real_redis, n)
    first = slack_app(LOCKGUARD_DRY_RUN="false")
    case_id, post = first.scan()
    assert case_id
    first.served.stop()  # the replica that posted the case is gone
    listener = Listener(real_redis)
    env = child_env(base_env(redis_server.port, first.fake), {"LOCKGUARD_DRY_RUN": "false"})
    kill_mid_release(real_redis, case_id, env, by="U0ALICE", lock_count=n)
    # The next replica starts, leads, and finishes the release once its progress has stalled.
    nxt = slack_app(
        LOCKGUARD_DRY_RUN="false",
        tuning=Tuning(lease_ms=1_000, resume_stall_s=0.3, resume_every_s=1),
    )
    ts = first.posted_ts(post)

    def shown_released() -> bool:
        return any(
            c.body.get("ts") == ts and "Released" in c.body["text"]
            for c in nxt.fake.calls("chat.update")
        )

    wait_until(shown_released, 10)
    events = listener.rest()
    assert len(events) == n  # the killed approver's and the resume's, together...
    assert len({e["key_hex"] for e in events}) == n  # ...exactly one for each lock
    assert not any(real_redis.exists(f"lock:job:{i}") for i in range(0, n, 97))
    [update] = [c for c in nxt.fake.calls("chat.update") if c.body.get("ts") == ts]
    assert ids.APPROVE not in json.dumps(update.body["blocks"])  # decided: no buttons
    assert "Verified" in json.dumps(update.body["blocks"])
    got = metrics(nxt)
    # A resumed release reports its whole case (the outcomes the killed approver recorded too):
    # that process's own counters died with it.
    assert got[("lockguard_releases_total", (("outcome", "released"),))] == n
    decisions = [
        (f[b"actor"], json.loads(f[b"data"])["decision"])
        for _, f in real_redis.xrange(b"{lockguard}:audit")
        if f[b"event"] == b"decision" and f[b"case_id"] == case_id.encode()
    ]
    assert decisions == [(b"U0ALICE", "approved"), (b"U0ALICE", "resumed")]
    assert scans_recorded(real_redis) == 1  # no scheduled scan: the schedules are off


def test_a_slack_approved_release_of_3000_cut_short_by_sigkill_is_finished_within_30s(
    slack_app: Factory,
    slack_fake: FakeSlack,
    redis_server: Any,
    real_redis: redis.Redis,
    tmp_path: Path,
    children: list[subprocess.Popen[bytes]],
) -> None:
    """Replica A (a real `lockguard serve`) offers 3,000 stuck locks as one case, its list in
    the thread; the approver clicks and types 3000; A is SIGKILLed mid-release. Replica B,
    already running with the shipped timings, finishes it: every lock released and announced
    exactly once, within 30 s of the kill."""
    n = 3_000
    plant_jobs(real_redis, n)
    port = free_port()
    url = f"http://127.0.0.1:{port}/slack/events"
    env = child_env(
        base_env(redis_server.port, slack_fake),
        {"LOCKGUARD_DRY_RUN": "false", "PORT": str(port)},
    )
    a = start_serve(env, tmp_path / "a.err", children)
    b = slack_app(LOCKGUARD_DRY_RUN="false")  # the other replica, shipped timings
    wait_until(lambda: live(port), 15)
    listener = Listener(real_redis)

    assert slash_command(url, SECRET, text="scan", channel_id=ALERTS).status == 200
    [post] = slack_fake.wait_for("chat.postMessage", timeout=20)
    case_id = buttons(post)[ids.APPROVE]
    wait_until(lambda: real_redis.hget(slack_message_key(case_id), "listed") == b"1", 20)
    [complete] = slack_fake.calls("files.completeUploadExternal")
    assert complete.body["files"][0]["title"] == f"lockguard-{case_id}.csv"
    ts = str(post.response["ts"])
    clicked = block_action(
        url,
        SECRET,
        action_id=ids.APPROVE,
        value=case_id,
        channel_id=ALERTS,
        message_ts=ts,
        trigger_id="1.2.kill",
    )
    assert clicked.status == 200
    slack_fake.wait_for("views.open", timeout=10)
    typed = {
        ids.APPROVE_COUNT_BLOCK: {
            ids.APPROVE_COUNT_ACTION: {"type": "plain_text_input", "value": "3000"}
        }
    }
    submitted = view_submission(
        url, SECRET, callback_id=ids.APPROVE_MODAL, private_metadata=case_id, values=typed
    )
    assert submitted.status == 200
    deadline = time.monotonic() + 30
    while real_redis.hlen(outcomes_key(case_id)) < 600:  # more than one batch done
        assert time.monotonic() < deadline, "A recorded too little in 30 s"
        time.sleep(0.005)
    os.kill(a.pid, signal.SIGKILL)
    killed = time.monotonic()
    a.wait(10)
    assert real_redis.hlen(outcomes_key(case_id)) < n, "A finished before it could be killed"

    def shown_released() -> bool:
        return any(
            c.body.get("ts") == ts and c.body["text"].split(": ", 1)[-1].startswith("Released")
            for c in slack_fake.calls("chat.update")
        )

    wait_until(shown_released, 30)
    took = time.monotonic() - killed
    assert took <= 30, took
    events = listener.rest()
    assert len(events) == n  # A's and B's together...
    assert len({e["key_hex"] for e in events}) == n  # ...exactly one for each lock
    assert not any(real_redis.exists(f"lock:job:{i}") for i in range(n))
    assert real_redis.hget(case_key(case_id), "state") == b"released"
    assert b.served.ops.home.scheduler is not None
    print(f"finished {took:.1f} s after the SIGKILL")


def live(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/livez", timeout=1) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False
