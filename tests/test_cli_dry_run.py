"""Dry run, then for real: what `lockguard scan` and `lockguard approve` print in dry run is
exactly what to run to release for real, and following it, as printed, releases the lock."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import redis

from bot import cli
from tests.core.test_layouts import uuid1_hex
from tests.test_cli_scan_notes import run

CASE = re.compile(r"LG-\d{6}-[0-9a-f]{6}")


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, real_redis: redis.Redis) -> redis.Redis:
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("REDIS_HOST", "127.0.0.1")
    monkeypatch.setenv("REDIS_PORT", str(real_redis.connection_pool.connection_kwargs["port"]))
    monkeypatch.setenv("LOCKGUARD_LOCK_PATTERNS", "lock:*")
    monkeypatch.delenv("LOCKGUARD_DRY_RUN", raising=False)  # the default: dry run
    return real_redis


def follow(line: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """Run a printed `[VAR=value ...] lockguard ...` command as a shell would: the assignments
    for this command only."""
    words = shlex.split(line)
    with monkeypatch.context() as m:
        while "=" in words[0]:
            name, _, value = words.pop(0).partition("=")
            m.setenv(name, value)
        assert words[0] == "lockguard", line
        return run(*words[1:])


def plant(r: redis.Redis, key: bytes = b"lock:stuck") -> bytes:
    """A redis-py lock whose uuid1 token says it was taken 2 h ago: offered on first sight."""
    s, _ = r.time()
    token = uuid1_hex(int(s) * 1000 - 7_200_000)
    r.set(key, token)
    return token


def scan_case(text: str) -> str:
    m = re.search(r"^case (LG-\S+): pending", text, re.M)
    assert m, text
    return m.group(1)


def test_scan_in_dry_run_prints_the_command_that_releases_for_real(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant(env)
    code, text = run("scan")
    assert code == 1
    case_id = scan_case(text)
    assert (
        f"approve in dry run (LOCKGUARD_DRY_RUN=true, releases nothing): lockguard approve "
        f"{case_id} --by NAME"
    ) in text
    [real] = [ln for ln in text.splitlines() if ln.startswith("release for real: ")]
    assert real == (
        f"release for real: LOCKGUARD_DRY_RUN=false lockguard approve {case_id} --by NAME"
    )
    code, out = follow(real.removeprefix("release for real: ").replace("NAME", "ann"), monkeypatch)
    assert code == 0, out
    assert "1 of 1 lock(s) released" in out
    assert env.exists(b"lock:stuck") == 0


def test_scan_with_dry_run_off_prints_the_plain_approve(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
    plant(env)
    text = run("scan")[1]
    case_id = scan_case(text)
    assert f"approve: lockguard approve {case_id} --by NAME   reject: lockguard reject" in text
    assert "release for real" not in text


def test_a_dry_run_approval_says_how_to_release_for_real_and_that_works(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = plant(env)
    first = scan_case(run("scan")[1])
    code, text = run("approve", first, "--by", "ann")
    assert code == 0
    assert f"case {first} approved by ann in DRY RUN (LOCKGUARD_DRY_RUN=true)" in text
    assert env.get(b"lock:stuck") == token
    lines = text.splitlines()
    i = lines.index(
        "to release for real: a dry-run approval closes its case; a new scan opens a new case "
        "of the locks still abandoned, to be approved with dry run off:"
    )
    scan_line, approve_line = lines[i + 1].strip(), lines[i + 2].strip()
    assert scan_line == "lockguard scan"
    assert approve_line == (
        "LOCKGUARD_DRY_RUN=false lockguard approve <the case id that scan prints> --by ann"
    )
    # The dry-run case is final: approved (dry run), nothing released, not pending.
    [listed] = json.loads(run("cases", "--json")[1])["cases"]
    assert (listed["case_id"], listed["state"], listed["dry_run"]) == (first, "approved", True)
    assert (
        f"case {first}: approved in dry run (closed, nothing released), 1 lock(s)"
        in (run("cases")[1])
    )

    code, scanned = follow(scan_line, monkeypatch)
    assert code == 1
    second = scan_case(scanned)
    assert second != first
    code, out = follow(approve_line.replace("<the case id that scan prints>", second), monkeypatch)
    assert code == 0, out
    assert f"case {second} approved by ann: 1 of 1 lock(s) released" in out
    assert env.exists(b"lock:stuck") == 0
    states = {c["case_id"]: c["state"] for c in json.loads(run("cases", "--json")[1])["cases"]}
    assert states == {first: "approved", second: "released"}


def test_approving_a_dry_run_approved_case_again_says_what_to_run(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    token = plant(env)
    case_id = scan_case(run("scan")[1])
    assert run("approve", case_id, "--by", "ann")[0] == 0
    capsys.readouterr()
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
    code, out = run("approve", case_id, "--by", "ann")
    err = capsys.readouterr().err
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert f"cannot approve case {case_id}: already decided (approved by ann" in err
    assert "it was approved in dry run, which released nothing and closed it" in err
    assert "`lockguard scan` opens a new case of its locks" in err
    assert "`LOCKGUARD_DRY_RUN=false lockguard approve <that case> --by ann`" in err
    assert env.get(b"lock:stuck") == token


def test_approve_help_says_dry_run_is_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["approve", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Dry run is the default (LOCKGUARD_DRY_RUN=true)" in text
    assert "LOCKGUARD_DRY_RUN=false lockguard approve CASE --by NAME" in text
    assert cli.main(["--help"]) == 0
    assert "dry run by default" in " ".join(capsys.readouterr().out.split())


def test_nothing_released_says_so_and_why(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant(env)
    case_id = scan_case(run("scan")[1])
    env.delete(b"lock:stuck")  # gone before the approval
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
    code, text = run("approve", case_id, "--by", "ann")
    assert code == 0
    assert (
        f"case {case_id} approved by ann: 0 of 1 lock(s) released "
        "(none deleted; why, lock by lock, below)"
    ) in text
    assert "1 already_gone; case closed, nothing released" in text
    assert "case released" not in text


def test_a_pending_case_says_no_dry_run_either_way(env: redis.Redis) -> None:
    """Pending, a case has no mode yet: whoever approves it decides (their LOCKGUARD_DRY_RUN);
    it used to read `"dry_run": false` while dry run was on."""
    plant(env)
    code, text = run("scan")
    case_id = scan_case(text)
    code, text = run("cases", "--json")
    assert code == 0
    [listed] = json.loads(text)["cases"]
    assert (listed["case_id"], listed["state"], listed["dry_run"]) == (case_id, "pending", None)
