"""A targets file naming Redis that is more than one plain server, for real: a TLS server that
requires a client certificate (tls: ca_file, cert_file, key_file, relative to the targets file)
with its password from a password_file, and a primary + replica behind Sentinel (sentinels,
master, password_file). Both are scanned, and an approval on one releases there only."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import main
from tests.core.test_layouts import uuid1_hex
from tests.redis_topologies import SentinelSet, TlsFiles, TlsRedis, make_tls_files

TLS_PASSWORD = "fleet-Tls-Pw-5e0c2b"
SENTINEL_PASSWORD = "fleet-Sentinel-Pw-a81d"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def servers(tls_files: TlsFiles) -> Iterator[tuple[TlsRedis, SentinelSet]]:
    with (
        TlsRedis(tls_files, auth_clients="yes", password=TLS_PASSWORD) as tls,
        SentinelSet(password=SENTINEL_PASSWORD) as sentinel,
    ):
        yield tls, sentinel


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


@pytest.fixture
def targets(
    servers: tuple[TlsRedis, SentinelSet],
    tls_files: TlsFiles,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[TlsRedis, SentinelSet]:
    tls, sentinel = servers
    tls.client().flushall()
    sentinel.primary().flushall()
    (tmp_path / "tls.pw").write_text(TLS_PASSWORD + "\n")
    (tmp_path / "sentinel.pw").write_text(SENTINEL_PASSWORD)

    def rel(p: Path) -> str:
        return os.path.relpath(p, tmp_path)

    hosts = ", ".join(f"'{a}'" for a in sentinel.addresses.split(","))
    (tmp_path / "targets.yaml").write_text(
        "targets:\n"
        f"  - name: secure\n    url: rediss://127.0.0.1:{tls.tls_port}/0\n"
        "    password_file: tls.pw\n"
        f"    tls: {{ca_file: {rel(tls_files.ca)}, cert_file: {rel(tls_files.client_cert)},"
        f" key_file: {rel(tls_files.client_key)}}}\n"
        f"  - name: billing\n    sentinels: [{hosts}]\n    master: {sentinel.name}\n"
        "    password_file: sentinel.pw\n    labels: {team: billing}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOCKGUARD_TARGETS_FILE", str(tmp_path / "targets.yaml"))
    return tls, sentinel


def test_tls_and_sentinel_targets_are_scanned_and_approved_on_their_own(
    targets: tuple[TlsRedis, SentinelSet],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tls, sentinel = targets
    for c in (tls.client(), sentinel.primary()):
        c.set(b"lock:stuck", uuid1_hex(int(c.time()[0]) * 1000 - 7_200_000))
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
    code, out = run("scan", "--json")
    assert code == 1
    secure, billing = json.loads(out)["targets"]
    assert (secure["status"], billing["status"]) == ("ok", "ok")
    assert secure["redis"] == f"rediss://127.0.0.1:{tls.tls_port}/0"
    assert billing["redis"].startswith("sentinel://127.0.0.1:")
    assert billing["redis"].endswith(f"/{sentinel.name}")
    assert [f["key"] for f in secure["findings"]] == ["lock:stuck"]
    assert [f["key"] for f in billing["findings"]] == ["lock:stuck"]

    code, out = run("approve", billing["case"]["case_id"], "--by", "ann")
    assert code == 0
    assert out.startswith("target billing: sentinel://")
    assert sentinel.primary().exists(b"lock:stuck") == 0
    assert tls.client().exists(b"lock:stuck") == 1
    shown = out + capsys.readouterr().err
    assert TLS_PASSWORD not in shown
    assert SENTINEL_PASSWORD not in shown
