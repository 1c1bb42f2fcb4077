"""TLS against a real redis-server with a throwaway CA (tests/redis_topologies.py): `lockguard scan`
and `approve` over rediss:// with REDIS_TLS_CA_FILE, a client certificate when the server requires
one, and every way the handshake can fail as one exit-3 line that names TLS and never the
password. Never a fall-back to plain text."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.cases.test_reclaim import Listener
from tests.redis_topologies import TlsFiles, TlsRedis, make_tls_files
from tests.test_cli_cases import plant_abandoned, run

PASSWORD = "tls-Passw0rd-9c1e"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_server(tls_files: TlsFiles) -> Iterator[TlsRedis]:
    """TLS with a password; client certificates optional."""
    with TlsRedis(tls_files, auth_clients="optional", password=PASSWORD) as server:
        yield server


@pytest.fixture
def plain(tls_server: TlsRedis) -> Iterator[redis.Redis]:
    """The server's plain port, for set-up and inspection only."""
    client = tls_server.client()
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("LOCKGUARD_LOCK_PATTERNS", "lock:*")
    return monkeypatch


def rediss(port: int, password: str | None = PASSWORD) -> str:
    auth = f":{password}@" if password else ""
    return f"rediss://{auth}127.0.0.1:{port}/0"


def test_scan_finds_and_approve_releases_over_tls(
    env: pytest.MonkeyPatch, plain: redis.Redis, tls_server: TlsRedis, tls_files: TlsFiles
) -> None:
    env.setenv("REDIS_URL", rediss(tls_server.tls_port))
    env.setenv("REDIS_TLS_CA_FILE", str(tls_files.ca))
    plant_abandoned(plain)
    code, text = run("scan", "--json")
    assert code == 1, text
    doc = json.loads(text)
    assert doc["redis"] == f"rediss://127.0.0.1:{tls_server.tls_port}/0"
    assert PASSWORD not in text
    case_id = doc["case"]["case_id"]
    listener = Listener(plain)
    env.setenv("LOCKGUARD_DRY_RUN", "false")
    code, text = run("approve", case_id, "--by", "ann")
    assert code == 0, text
    assert "1 of 1 lock(s) released" in text
    assert plain.exists(b"lock:stuck") == 0
    events = listener.rest()
    assert len(events) == 1
    assert events[0]["key"] == "lock:stuck"


def test_a_ca_file_without_a_url_turns_tls_on(
    env: pytest.MonkeyPatch, plain: redis.Redis, tls_server: TlsRedis, tls_files: TlsFiles
) -> None:
    # REDIS_HOST by name: the server's certificate is checked for "localhost" too.
    env.setenv("REDIS_HOST", "localhost")
    env.setenv("REDIS_PORT", str(tls_server.tls_port))
    env.setenv("REDIS_PASSWORD", PASSWORD)
    env.setenv("REDIS_TLS_CA_FILE", str(tls_files.ca))
    code, text = run("check")
    assert code == 0, text
    assert f"redis: ok (rediss://localhost:{tls_server.tls_port}/0" in text


def test_a_certificate_that_does_not_verify_is_exit_3_naming_the_ca_file(
    env: pytest.MonkeyPatch,
    plain: redis.Redis,
    tls_server: TlsRedis,
    tls_files: TlsFiles,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plant_abandoned(plain)
    env.setenv("REDIS_URL", rediss(tls_server.tls_port))
    env.setenv("REDIS_TLS_CA_FILE", str(tls_files.other_ca))
    code, text = run("scan", "--json")
    err = capsys.readouterr().err
    assert code == 3
    assert text == ""
    assert "TLS: the certificate of Redis at rediss://127.0.0.1:" in err
    assert "did not verify against REDIS_TLS_CA_FILE" in err
    assert PASSWORD not in err
    assert len(err.strip().splitlines()) == 1
    assert plain.get(b"lock:stuck")  # nothing touched


def test_without_a_ca_file_the_system_cas_are_used_and_refuse_a_private_ca(
    env: pytest.MonkeyPatch, tls_server: TlsRedis, capsys: pytest.CaptureFixture[str]
) -> None:
    env.setenv("REDIS_URL", rediss(tls_server.tls_port))
    code, _ = run("check")
    err = capsys.readouterr().err
    assert code == 3
    assert "did not verify" in err
    assert PASSWORD not in err


def test_the_host_name_is_checked(
    env: pytest.MonkeyPatch, tls_files: TlsFiles, capsys: pytest.CaptureFixture[str]
) -> None:
    with TlsRedis(tls_files, cert=(tls_files.wrong_name_cert, tls_files.wrong_name_key)) as other:
        env.setenv("REDIS_URL", rediss(other.tls_port, None))
        env.setenv("REDIS_TLS_CA_FILE", str(tls_files.ca))  # the right CA: only the name is wrong
        code, _ = run("check")
    err = capsys.readouterr().err
    assert code == 3
    assert "did not verify against REDIS_TLS_CA_FILE" in err
    assert "mismatch" in err


def test_rediss_to_a_plain_port_is_an_error_not_a_downgrade(
    env: pytest.MonkeyPatch,
    tls_server: TlsRedis,
    tls_files: TlsFiles,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env.setenv("REDIS_URL", rediss(tls_server.plain.port))
    env.setenv("REDIS_TLS_CA_FILE", str(tls_files.ca))
    env.setenv("LOCKGUARD_REDIS_TIMEOUT_SECONDS", "0.5")
    code, _ = run("check")
    err = capsys.readouterr().err
    assert code == 3
    assert "TLS: Redis at rediss://127.0.0.1:" in err
    assert "TLS handshake" in err
    assert PASSWORD not in err


def test_a_plain_url_with_tls_settings_is_refused_before_redis_is_touched(
    env: pytest.MonkeyPatch,
    tls_server: TlsRedis,
    tls_files: TlsFiles,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env.setenv("REDIS_URL", f"redis://:{PASSWORD}@127.0.0.1:{tls_server.tls_port}/0")
    env.setenv("REDIS_TLS_CA_FILE", str(tls_files.ca))
    code, _ = run("scan")
    err = capsys.readouterr().err
    assert code == 2
    assert "REDIS_URL: is redis:// (no TLS), but REDIS_TLS_CA_FILE is set" in err
    assert PASSWORD not in err


@pytest.fixture(scope="module")
def mtls_server(tls_files: TlsFiles) -> Iterator[TlsRedis]:
    """TLS that requires a client certificate signed by the CA."""
    with TlsRedis(tls_files, auth_clients="yes") as server:
        yield server


def test_a_required_client_certificate_when_given_works(
    env: pytest.MonkeyPatch, mtls_server: TlsRedis, tls_files: TlsFiles
) -> None:
    r = mtls_server.client()
    try:
        r.flushall()
        plant_abandoned(r)
        env.setenv("REDIS_URL", rediss(mtls_server.tls_port, None))
        env.setenv("REDIS_TLS_CA_FILE", str(tls_files.ca))
        env.setenv("REDIS_TLS_CERT_FILE", str(tls_files.client_cert))
        env.setenv("REDIS_TLS_KEY_FILE", str(tls_files.client_key))
        code, text = run("scan", "--json")
        assert code == 1, text
        case_id = json.loads(text)["case"]["case_id"]
        env.setenv("LOCKGUARD_DRY_RUN", "false")
        code, text = run("approve", case_id, "--by", "ann")
        assert code == 0, text
        assert r.exists(b"lock:stuck") == 0
    finally:
        r.close()


def test_a_required_client_certificate_when_missing_is_exit_3_saying_so(
    env: pytest.MonkeyPatch,
    mtls_server: TlsRedis,
    tls_files: TlsFiles,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env.setenv("REDIS_URL", rediss(mtls_server.tls_port, None))
    env.setenv("REDIS_TLS_CA_FILE", str(tls_files.ca))
    code, _ = run("check")
    err = capsys.readouterr().err
    assert code == 3
    assert "TLS: Redis at rediss://127.0.0.1:" in err
    assert "REDIS_TLS_CERT_FILE" in err


def test_a_client_certificate_the_server_does_not_trust_is_refused(
    env: pytest.MonkeyPatch,
    mtls_server: TlsRedis,
    tls_files: TlsFiles,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env.setenv("REDIS_URL", rediss(mtls_server.tls_port, None))
    env.setenv("REDIS_TLS_CA_FILE", str(tls_files.ca))
    # a server certificate (serverAuth only) offered as the client's
    env.setenv("REDIS_TLS_CERT_FILE", str(tls_files.server_cert))
    env.setenv("REDIS_TLS_KEY_FILE", str(tls_files.server_key))
    code, _ = run("check")
    err = capsys.readouterr().err
    assert code == 3
    assert "TLS: Redis at" in err
    assert "client certificate" in err


def test_a_certificate_and_a_key_that_do_not_match_are_refused_at_load(
    env: pytest.MonkeyPatch, tls_files: TlsFiles, capsys: pytest.CaptureFixture[str]
) -> None:
    env.setenv("REDIS_URL", "rediss://127.0.0.1:1/0")
    env.setenv("REDIS_TLS_CERT_FILE", str(tls_files.client_cert))
    env.setenv("REDIS_TLS_KEY_FILE", str(tls_files.server_key))
    code, _ = run("check")
    err = capsys.readouterr().err
    assert code == 2
    assert "REDIS_TLS_CERT_FILE:" in err
    assert "REDIS_TLS_KEY_FILE" in err
    assert "KEY_VALUES_MISMATCH" in err


def test_an_encrypted_key_is_refused_at_load_never_prompted_for(
    env: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-passout",
            "pass:secret-passphrase",
            "-keyout",
            "enc.key",
            "-out",
            "enc.crt",
            "-days",
            "1",
            "-subj",
            "/CN=x",
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=30,
    )
    env.setenv("REDIS_URL", "rediss://127.0.0.1:1/0")
    env.setenv("REDIS_TLS_CERT_FILE", str(tmp_path / "enc.crt"))
    env.setenv("REDIS_TLS_KEY_FILE", str(tmp_path / "enc.key"))
    code, _ = run("check")
    err = capsys.readouterr().err
    assert code == 2
    assert "the private key is encrypted" in err
