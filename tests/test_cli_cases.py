"""The break-glass path: `lockguard scan / cases / approve / reject / audit / demo`, as a user
runs them."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
import redis

from bot import cli
from bot.demo import walkthrough
from tests.conftest import RedisServer
from tests.core.test_layouts import uuid1_hex


def point_at(monkeypatch: pytest.MonkeyPatch, server: RedisServer) -> None:
    """The CLI's settings for `server`, locks under `lock:*`, run where no .env is."""
    monkeypatch.setenv("REDIS_HOST", "127.0.0.1")
    monkeypatch.setenv("REDIS_PORT", str(server.port))
    monkeypatch.setenv("LOCKGUARD_LOCK_PATTERNS", "lock:*")
    monkeypatch.chdir(os.path.dirname(__file__))  # no stray .env


@pytest.fixture
def env(
    monkeypatch: pytest.MonkeyPatch, redis_server: RedisServer, real_redis: redis.Redis
) -> redis.Redis:
    point_at(monkeypatch, redis_server)
    return real_redis


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main(list(argv), out=out)
    return code, out.getvalue()


def plant_abandoned(r: redis.Redis, key: bytes = b"lock:stuck") -> bytes:
    """A redis-py lock (timeout=None) whose uuid1 token says it was taken two hours ago: past
    the threshold on first sight. Returns the token."""
    token = uuid1_hex(int(r.time()[0]) * 1000 - 7_200_000)
    r.set(key, token)
    return token


def open_case(r: redis.Redis) -> str:
    """The case `lockguard scan` opens for one `plant_abandoned` lock."""
    plant_abandoned(r)
    code, text = run("scan", "--json")
    assert code == 1
    doc = json.loads(text)
    assert doc["case"]["state"] == "pending"
    return str(doc["case"]["case_id"])


def test_scan_opens_a_case_and_cases_lists_it(env: redis.Redis) -> None:
    case_id = open_case(env)
    code, text = run("cases", "--json")
    assert code == 0
    listed = json.loads(text)["cases"]
    assert [c["case_id"] for c in listed] == [case_id]
    assert listed[0]["locks"][0]["key_hex"] == b"lock:stuck".hex()
    code, text = run("cases")
    assert case_id in text
    assert "lock:stuck" in text


def test_approve_in_default_dry_run_touches_nothing(env: redis.Redis) -> None:
    case_id = open_case(env)
    token = env.get(b"lock:stuck")
    code, text = run("approve", case_id, "--by", "ann")
    assert code == 0
    assert "DRY RUN" in text
    assert token
    assert env.get(b"lock:stuck") == token


def test_approve_releases_when_dry_run_is_off(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_id = open_case(env)
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
    code, text = run("approve", case_id, "--by", "ann")
    assert code == 0, text
    assert "1 of 1 lock(s) released" in text
    assert env.exists(b"lock:stuck") == 0
    code, text = run("audit", "--case", case_id, "--json")
    entries = json.loads(text)["entries"]
    events = [e["event"] for e in entries]
    assert {"case_opened", "decision", "release", "case_closed"} <= set(events)
    assert events.count("release") == 1  # and no second entry for its verification
    [release] = [e for e in entries if e["event"] == "release"]
    assert release["data"]["verified"] is True


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["approve", "LG-200101-abcdef", "--by", "ann"], "no case LG-200101-abcdef"),
        (["approve", "not-a-case", "--by", "ann"], "malformed case id"),
        (["reject", "LG-2001", "--by", "ann", "--reason", "x"], "malformed case id"),
        (["approve", "LG-200101-abcdef", "--by", "  "], "must be named"),
    ],
)
def test_bad_case_input_is_exit_2_with_a_clear_error(
    env: redis.Redis, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    env.set(b"lock:keep", b"x")
    code, _ = run(*argv)
    assert code == 2
    assert message in capsys.readouterr().err
    assert env.get(b"lock:keep") == b"x"


def test_approving_a_rejected_case_is_refused_and_changes_nothing(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    case_id = open_case(env)
    token = env.get(b"lock:stuck")
    code, text = run("reject", case_id, "--by", "bob", "--reason", "owner is paused, not dead")
    assert code == 0
    assert "rejected" in text
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
    code, _ = run("approve", case_id, "--by", "ann")
    assert code == 2
    assert "already decided (rejected by bob" in capsys.readouterr().err
    assert token
    assert env.get(b"lock:stuck") == token


def test_reject_needs_a_reason(env: redis.Redis, capsys: pytest.CaptureFixture[str]) -> None:
    case_id = open_case(env)
    code, _ = run("reject", case_id, "--by", "bob", "--reason", " ")
    assert code == 2
    assert "needs a reason" in capsys.readouterr().err


def test_demo_runs_every_step_on_fakeredis_when_no_server_is_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(walkthrough.shutil, "which", lambda name: None)
    out = io.StringIO()
    assert walkthrough.run_demo(out, assume_yes=True, wait_seconds=3.5) == 0
    text = out.getvalue()
    assert "fakeredis" in text
    _assert_demo_steps(text)


def _assert_demo_steps(text: str) -> None:
    for step in (
        "1. planting locks",
        "2. scan 1",
        "3. scan 2",
        "4. approval",
        "5. release",
        "6. reclaim events received by a subscriber",
        "7. the live lock",
        "8. audit trail",
        "cleaned up",
    ):
        assert step in text, step
    assert "kept_alive_by_contenders" in text
    assert "long_held_renewing" in text
    assert "received by a subscriber on 'locks:reclaimed': 3" in text
    assert "still held by its owner" in text
    # ShedLock's and Redisson's own renewal is not overdue yet: reported, left alone
    assert "renewal not due yet (ShedLock's keep-alive extends" in text
    assert "renewal not due yet (Redisson's watchdog renews" in text
    for key in ("job-lock:default:cleanupJob", "redisson:orders:settle"):
        assert f"{key}: still there (its library renews on its own" in text


@pytest.mark.real
def test_demo_yes_completes_with_exit_0_as_the_readme_says(redis_server: RedisServer) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "demo", "--yes", "--wait", "3.5"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert "redis-server" in proc.stdout
    _assert_demo_steps(proc.stdout)


def test_demo_without_yes_and_no_terminal_rejects_and_touches_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(walkthrough.shutil, "which", lambda name: None)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    out = io.StringIO()
    walkthrough.run_demo(out, assume_yes=False, wait_seconds=3.5)
    text = out.getvalue()
    assert "rejected, no lock was touched" in text
    assert "received by a subscriber on 'locks:reclaimed': 0" in text


def test_check_reports_redis_and_the_last_scan(env: redis.Redis) -> None:
    code, text = run("check")
    assert code == 0
    assert "redis: ok" in text
    assert "last scan: none recorded yet" in text
    env.set(b"lock:x", b"t")
    run("scan")
    code, text = run("check")
    assert code == 0
    assert "last scan: 1 lock(s), 1 finding(s)" in text
