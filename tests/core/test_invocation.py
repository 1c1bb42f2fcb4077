"""The next steps lockguard prints name the command that works where the user is: `lockguard`
when that is on PATH, `./dev.sh lockguard` in the checkout (the README's path), else the venv's
script by its path; pasted, none is `command not found`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bot.core import invocation
from tests.conftest import RedisServer
from tests.core.test_layouts import uuid1_hex

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = os.path.join(sys.prefix, "bin")
IN_CHECKOUT = (ROOT / ".venv").exists() and os.path.samefile(ROOT / ".venv", sys.prefix)


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    invocation.command.cache_clear()
    yield
    invocation.command.cache_clear()


def without_venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    path = os.environ.get("PATH", "").split(os.pathsep)
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in path if p != VENV_BIN))


def test_on_path_it_is_lockguard(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    assert invocation.command() == "lockguard"


@pytest.mark.skipif(not IN_CHECKOUT, reason="the tests run from another venv than .venv")
def test_in_the_checkout_it_is_dev_sh(monkeypatch: pytest.MonkeyPatch) -> None:
    without_venv_on_path(monkeypatch)
    monkeypatch.chdir(ROOT)
    assert invocation.command() == "./dev.sh lockguard"


def test_elsewhere_it_is_the_venvs_script(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    without_venv_on_path(monkeypatch)
    monkeypatch.chdir(tmp_path)
    got = invocation.command()
    assert os.path.samefile(tmp_path / got, Path(VENV_BIN) / "lockguard")


@pytest.mark.skipif(not IN_CHECKOUT, reason="the tests run from another venv than .venv")
def test_scan_prints_next_steps_that_run_where_the_user_is(
    redis_server: RedisServer, real_redis: redis.Redis
) -> None:
    real_redis.set(b"lock:stuck", uuid1_hex(int(real_redis.time()[0]) * 1000 - 7_200_000))
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != VENV_BIN)
    env = {
        "PATH": path,
        "HOME": os.environ.get("HOME", "/tmp"),
        "REDIS_PORT": str(redis_server.port),
        "LOCKGUARD_LOCK_PATTERNS": "lock:*",
    }
    done = subprocess.run(
        [str(Path(VENV_BIN) / "lockguard"), "scan"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "./dev.sh lockguard approve LG-" in done.stdout
    assert "release for real: LOCKGUARD_DRY_RUN=false ./dev.sh lockguard approve" in done.stdout
