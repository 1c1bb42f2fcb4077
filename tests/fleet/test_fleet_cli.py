"""The CLI over a fleet of real Redis servers, as an operator runs it: a plain redis-server, one
with `requirepass` whose password comes from a password file, a 3-primary Redis Cluster, and a
port where nothing listens. Every target is scanned and reported, the dead one is exit 3 and
stalls nothing, cases carry their target, an approval acts on its own target only (every key
of the others byte for byte the same), and lockguard's state stays in the Redis scanned."""

from __future__ import annotations

import io
import json
import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from bot.cli import main
from bot.demo.embedded import free_port
from tests.cluster_fixtures import start_cluster
from tests.conftest import RedisServer, start_or_skip
from tests.core.test_layouts import uuid1_hex
from tests.embedded_cluster import EmbeddedCluster

PASSWORD = "fleet-Secret-Pw-93b1e07"
LIVE = ("plain", "auth", "sessions")


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[RedisServer, RedisServer, EmbeddedCluster]]:
    plain = start_or_skip()
    auth = start_or_skip("--requirepass", PASSWORD)
    try:
        with start_cluster() as cluster:
            yield plain, auth, cluster
    finally:
        plain.stop()
        auth.stop()


@dataclass
class Fleet:
    clients: dict[str, Any]  # name -> redis.Redis or RedisCluster
    dead_port: int

    def keys(self, name: str) -> dict[bytes, bytes | None]:
        """Every key of target `name` and its DUMP (the exact bytes Redis holds)."""
        c = self.clients[name]
        return {k: c.dump(k) for k in c.scan_iter(count=1000)}


@pytest.fixture
def fleet(
    servers: tuple[RedisServer, RedisServer, EmbeddedCluster],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Fleet]:
    plain, auth, cluster = servers
    clients: dict[str, Any] = {
        "plain": plain.client(),
        "auth": auth.client(password=PASSWORD),
        "sessions": cluster.client(),
    }
    for name, c in clients.items():
        if name == "sessions":
            c.flushall(target_nodes=RedisCluster.PRIMARIES)
        else:
            c.flushall()
    dead = free_port()
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "auth.pw").write_text(PASSWORD + "\n")
    (tmp_path / "targets.yaml").write_text(
        "targets:\n"
        f"  - name: plain\n    url: redis://127.0.0.1:{plain.port}/0\n"
        "    labels: {team: payments, env: prod}\n"
        f"  - name: auth\n    url: redis://127.0.0.1:{auth.port}/0\n"
        "    password_file: secrets/auth.pw\n"
        f"  - name: sessions\n    cluster: true\n    url: redis://127.0.0.1:{cluster.port}\n"
        f"  - name: dead\n    url: redis://127.0.0.1:{dead}/0\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOCKGUARD_TARGETS_FILE", "targets.yaml")
    yield Fleet(clients, dead)
    for c in clients.values():
        c.close()


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def plant_abandoned(c: redis.Redis, key: bytes = b"lock:stuck") -> None:
    """A redis-py lock whose uuid1 token says it was taken two hours ago: past the threshold
    on first sight, so the first scan offers it."""
    c.set(key, uuid1_hex(int(c.time()[0]) * 1000 - 7_200_000))


def test_scan_json_reports_every_target_and_a_dead_one_is_exit_3(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.clients["plain"].set(b"lock:p", b"tok")
    fleet.clients["auth"].set(b"lock:a", b"tok")
    fleet.clients["sessions"].set(b"lock:s", b"tok")
    fleet.clients["sessions"].set(b"lock:healthy", b"tok", px=600_000)
    code, out = run("scan", "--json")
    assert code == 3
    doc = json.loads(out)
    parts = {t["name"]: t for t in doc["targets"]}
    assert [t["name"] for t in doc["targets"]] == [*LIVE, "dead"]
    assert [parts[n]["status"] for n in LIVE] == ["ok"] * 3
    assert all(parts[n]["error"] is None for n in LIVE)
    assert parts["plain"]["labels"] == {"team": "payments", "env": "prod"}
    assert parts["sessions"]["redis"].startswith("redis-cluster://127.0.0.1:")
    assert {n: [f["key"] for f in parts[n]["findings"]] for n in LIVE} == {
        "plain": ["lock:p"],
        "auth": ["lock:a"],
        "sessions": ["lock:s"],
    }
    assert parts["sessions"]["scanned"] == 2
    dead = parts["dead"]
    assert dead["status"] == "error"
    assert f"127.0.0.1:{fleet.dead_port}" in dead["error"]
    assert dead["findings"] == []
    assert PASSWORD not in out + capsys.readouterr().err


def test_one_target_with_target_and_its_exit_code(fleet: Fleet) -> None:
    fleet.clients["plain"].set(b"lock:p", b"tok")
    fleet.clients["auth"].set(b"lock:a", b"tok", px=600_000)
    code, out = run("scan", "--json", "--target", "plain")
    assert code == 1
    assert [t["name"] for t in json.loads(out)["targets"]] == ["plain"]
    code, out = run("scan", "--target", "auth")
    assert code == 0
    assert "== auth: redis://127.0.0.1:" in out
    assert "== plain" not in out


def test_an_unknown_target_is_exit_2_listing_the_names(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (
        ("scan", "--target", "ordres"),
        ("cases", "--target", "x"),
        ("check", "--target", "x"),
    ):
        assert run(*argv)[0] == 2
        assert "the targets are: plain, auth, sessions, dead" in capsys.readouterr().err
    assert all(fleet.keys(n) == {} for n in LIVE)  # nothing touched


def test_the_table_has_a_section_per_target(fleet: Fleet) -> None:
    fleet.clients["auth"].set(b"lock:a", b"tok")
    code, out = run("scan")
    assert code == 3
    heads = [line for line in out.splitlines() if line.startswith("== ")]
    assert [h.split(":")[0] for h in heads] == ["== plain", "== auth", "== sessions", "== dead"]
    assert heads[0].endswith("(team=payments, env=prod)")
    section = out.split("== auth")[1].split("== sessions")[0]
    assert "lock:a" in section
    assert "infinite_ttl" in section
    assert f"error: cannot reach Redis at redis://127.0.0.1:{fleet.dead_port}/0" in out
    assert out.rstrip().endswith("4 target(s): 3 scanned; could not be scanned: dead (exit 3)")


def test_state_stays_in_the_target_scanned(fleet: Fleet) -> None:
    fleet.clients["auth"].set(b"lock:a", b"tok")
    assert run("scan", "--target", "auth")[0] == 1
    own = [k for k in fleet.keys("auth") if k.startswith(b"{lockguard}")]
    assert own  # the tenure history is kept, in auth's own Redis
    assert fleet.keys("plain") == {}
    assert fleet.keys("sessions") == {}


def test_an_approval_acts_on_its_own_target_only(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
    for name in LIVE:  # the same lock name on each target
        plant_abandoned(fleet.clients[name])
    code, out = run("scan", "--json")
    assert code == 3
    parts = json.loads(out)["targets"]
    case_of = {t["name"]: t["case"]["case_id"] for t in parts if t.get("case")}
    assert set(case_of) == set(LIVE)

    code, out = run("cases", "--json")
    assert code == 3  # the dead one could not be read; the others are listed
    doc = json.loads(out)
    assert sorted((c["target"], c["case_id"]) for c in doc["cases"]) == sorted(
        (n, case_of[n]) for n in LIVE
    )
    assert [e["target"] for e in doc["errors"]] == ["dead"]

    before = {n: fleet.keys(n) for n in ("plain", "sessions")}
    code, out = run("approve", case_of["auth"], "--by", "ann")  # no --target: it is found
    assert code == 0
    assert out.startswith("target auth: redis://127.0.0.1:")
    assert fleet.clients["auth"].exists(b"lock:stuck") == 0
    assert {n: fleet.keys(n) for n in ("plain", "sessions")} == before
    assert all(fleet.clients[n].exists(b"lock:stuck") for n in ("plain", "sessions"))

    code, out = run("reject", case_of["sessions"], "--by", "bob", "--reason", "busy")
    assert code == 0
    assert "rejected" in out
    assert fleet.clients["sessions"].exists(b"lock:stuck") == 1

    code, out = run("cases")
    assert code == 3
    section = out.split("== sessions")[1].split("== dead")[0]
    assert case_of["sessions"] in section
    assert "rejected" in section


def test_approve_names_a_case_no_target_has(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    plant_abandoned(fleet.clients["plain"])
    doc = json.loads(run("scan", "--json", "--target", "plain")[1])
    case_id = doc["targets"][0]["case"]["case_id"]
    # on another target: that target has no such case
    assert run("approve", case_id, "--by", "ann", "--target", "auth")[0] == 2
    assert f"no case {case_id}" in capsys.readouterr().err
    assert fleet.clients["plain"].exists(b"lock:stuck") == 1


def test_a_target_that_never_answers_stalls_nobody(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A port that takes connections and never answers: the scan waits one Redis timeout on
    that target's own thread, and reports the others."""
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(64)
    text = (tmp_path / "targets.yaml").read_text()
    (tmp_path / "targets.yaml").write_text(
        text.replace(f":{fleet.dead_port}/0", f":{hole.getsockname()[1]}/0")
    )
    monkeypatch.setenv("LOCKGUARD_REDIS_TIMEOUT_SECONDS", "1")
    fleet.clients["plain"].set(b"lock:p", b"tok")
    try:
        code, out = run("scan", "--json")
    finally:
        hole.close()
    assert code == 3
    parts = {t["name"]: t for t in json.loads(out)["targets"]}
    assert "timed out" in parts["dead"]["error"]
    assert [f["key"] for f in parts["plain"]["findings"]] == ["lock:p"]


def test_check_and_audit_over_the_fleet(fleet: Fleet) -> None:
    plant_abandoned(fleet.clients["auth"])
    run("scan", "--target", "auth")
    code, out = run("check")
    assert code == 3
    auth = out.split("== auth")[1].split("== sessions")[0]
    assert "redis: ok" in auth
    assert "last scan: 1 lock(s), 1 finding(s)" in auth
    code, out = run("audit", "--json")
    assert code == 3
    doc = json.loads(out)
    assert doc["entries"]
    assert {e["target"] for e in doc["entries"]} == {"auth"}
    assert [e["target"] for e in doc["errors"]] == ["dead"]
    assert run("audit", "--target", "plain")[0] == 0


def test_config_lists_the_targets_never_the_password(fleet: Fleet) -> None:
    code, out = run("config", "--json")
    assert code == 0
    doc = json.loads(out)
    assert [t["name"] for t in doc["targets"]] == [*LIVE, "dead"]
    auth = doc["targets"][1]
    assert auth["password"] == "***"
    assert auth["patterns"] == ["lock:*"]
    assert {"name": "LOCKGUARD_TARGETS_FILE", "value": "targets.yaml"}.items() <= next(
        s for s in doc["settings"] if s["name"] == "LOCKGUARD_TARGETS_FILE"
    ).items()
    code, text = run("config")
    assert "4 target(s) in LOCKGUARD_TARGETS_FILE" in text
    assert "plain: redis://127.0.0.1:" in text
    assert PASSWORD not in out + text


def test_a_password_files_password_is_masked_in_every_log_line(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.core import logs

    monkeypatch.setenv("LOCKGUARD_LOG_LEVEL", "info")
    assert run("check", "--target", "auth")[0] == 0
    logs.event(logs.logger("test"), "leak", logging.WARNING, value=f"pw={PASSWORD}")
    err = capsys.readouterr().err
    assert "leak" in err
    assert PASSWORD not in err
