"""Sentinel against real servers (a primary, its replica, sentinels: tests/redis_topologies.py):
scan and approve through REDIS_SENTINELS / REDIS_SENTINEL_MASTER, and a failover that the same
Engine (same client, no restart) follows. A lock that changed hands on the new primary between the
case and the release is never deleted."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.compose import build_engine
from bot.config import load_settings
from bot.core.errors import RedisUnavailableError, ScanBusyError
from bot.engine import Engine
from bot.store.keyspace import SCAN_LEASE
from tests.cases.test_reclaim import Listener
from tests.redis_topologies import SentinelSet, TlsFiles, make_tls_files
from tests.test_cli_cases import plant_abandoned, run

PASSWORD = "sentinel-Passw0rd-4d2b"


@pytest.fixture
def sentinels() -> Iterator[SentinelSet]:
    """Fresh for each test: failovers change who is the primary."""
    with SentinelSet(sentinels=2, password=PASSWORD) as s:
        yield s


@pytest.fixture
def env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sentinels: SentinelSet
) -> pytest.MonkeyPatch:
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("REDIS_SENTINELS", sentinels.addresses)
    monkeypatch.setenv("REDIS_SENTINEL_MASTER", sentinels.name)
    monkeypatch.setenv("REDIS_PASSWORD", PASSWORD)
    monkeypatch.setenv("LOCKGUARD_LOCK_PATTERNS", "lock:*")
    return monkeypatch


def engine_for(s: SentinelSet) -> Engine:
    return build_engine(
        load_settings(
            {
                "REDIS_SENTINELS": s.addresses,
                "REDIS_SENTINEL_MASTER": s.name,
                "REDIS_PASSWORD": PASSWORD,
                "LOCKGUARD_LOCK_PATTERNS": "lock:*",
                "LOCKGUARD_DRY_RUN": "false",
            }
        )
    )


def test_scan_and_approve_through_the_sentinels(
    env: pytest.MonkeyPatch, sentinels: SentinelSet
) -> None:
    primary = sentinels.primary()
    plant_abandoned(primary)
    code, text = run("scan", "--json")
    assert code == 1, text
    doc = json.loads(text)
    assert doc["redis"] == f"sentinel://{sentinels.addresses}/{sentinels.name}"
    assert PASSWORD not in text
    listener = Listener(primary)
    env.setenv("LOCKGUARD_DRY_RUN", "false")
    code, text = run("approve", doc["case"]["case_id"], "--by", "ann")
    assert code == 0, text
    assert "1 of 1 lock(s) released" in text
    assert primary.exists(b"lock:stuck") == 0
    assert len(listener.rest()) == 1


def test_the_same_engine_follows_a_planned_failover(sentinels: SentinelSet) -> None:
    engine = engine_for(sentinels)
    old = sentinels.primary_port()
    plant_abandoned(sentinels.primary(), b"lock:before")
    _, case = engine.scan("cli")
    assert case is not None
    new = sentinels.failover()
    assert new != old
    primary = sentinels.node(new)
    listener = Listener(primary)
    report = engine.approve(case.id, "ann")  # the case was replicated; the release runs on `new`
    assert report.counts == {"released": 1}
    assert primary.exists(b"lock:before") == 0
    assert len(listener.rest()) == 1
    plant_abandoned(primary, b"lock:after")
    _, case = engine.scan("cli")
    assert case is not None
    assert case.lock_count == 1
    assert engine.approve(case.id, "ann").counts == {"released": 1}
    assert primary.exists(b"lock:after") == 0


def test_the_same_engine_follows_when_the_primary_dies(sentinels: SentinelSet) -> None:
    engine = engine_for(sentinels)
    plant_abandoned(sentinels.primary(), b"lock:before")
    _, case = engine.scan("cli")
    assert case is not None
    new = sentinels.kill_primary()
    primary = sentinels.node(new)
    assert engine.status().redis_version
    assert engine.approve(case.id, "ann").counts == {"released": 1}
    assert primary.exists(b"lock:before") == 0
    plant_abandoned(primary, b"lock:after")
    _, case = engine.scan("cli")
    assert case is not None
    assert engine.approve(case.id, "ann").counts == {"released": 1}


def test_failover_between_approval_and_release_never_deletes_a_lock_that_changed_hands(
    sentinels: SentinelSet,
) -> None:
    """The case is opened on the old primary; after the failover the lock is taken again (a new
    token) on the new primary; the approval then reaches the new primary and finds another
    holder: skipped, the lock stays, no event."""
    engine = engine_for(sentinels)
    plant_abandoned(sentinels.primary())
    plant_abandoned(sentinels.primary(), b"lock:still-abandoned")
    _, case = engine.scan("cli")
    assert case is not None
    assert case.lock_count == 2
    primary = sentinels.node(sentinels.failover())
    new_token = b"a-new-holder-" + b"7" * 20
    primary.set(b"lock:stuck", new_token, px=600_000)
    listener = Listener(primary)
    report = engine.approve(case.id, "ann")
    assert report.counts == {"skipped_reacquired": 1, "released": 1}
    assert primary.get(b"lock:stuck") == new_token
    assert primary.exists(b"lock:still-abandoned") == 0
    events = listener.rest()
    assert [e["key"] for e in events] == ["lock:still-abandoned"]


def test_a_wrong_master_name_is_exit_3_naming_the_setting(
    env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env.setenv("REDIS_SENTINEL_MASTER", "not-monitored")
    code, _ = run("check")
    err = capsys.readouterr().err
    assert code == 3
    assert "name no healthy primary for REDIS_SENTINEL_MASTER" in err
    assert "/not-monitored" in err
    assert PASSWORD not in err


def test_no_sentinel_answering_is_exit_3(
    env: pytest.MonkeyPatch, sentinels: SentinelSet, capsys: pytest.CaptureFixture[str]
) -> None:
    for s in sentinels.sentinels:
        s.stop()
    code, _ = run("check")
    err = capsys.readouterr().err
    assert code == 3
    assert "cannot reach any of the sentinels at sentinel://" in err


def test_a_wrong_password_is_exit_3_and_never_shown(
    env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env.setenv("REDIS_PASSWORD", "not-" + PASSWORD)
    code, _ = run("scan")
    err = capsys.readouterr().err
    assert code == 3
    assert "refused the credentials" in err
    assert PASSWORD not in err


def test_without_the_sentinels_the_engine_reports_redis_unavailable(sentinels: SentinelSet) -> None:
    engine = engine_for(sentinels)
    engine.status()
    sentinels.stop()
    with pytest.raises(RedisUnavailableError):
        engine.status()


# -- Sentinel with TLS ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def test_sentinel_with_tls_scans_approves_and_follows_a_failover(tls_files: TlsFiles) -> None:
    """The sentinels and the servers listen with TLS (and replicate over it); lockguard speaks
    TLS to both, verifying their certificates against REDIS_TLS_CA_FILE."""
    with SentinelSet(password=PASSWORD, tls=tls_files) as s:
        settings = load_settings(
            {
                "REDIS_SENTINELS": s.addresses,
                "REDIS_SENTINEL_MASTER": s.name,
                "REDIS_PASSWORD": PASSWORD,
                "REDIS_TLS_CA_FILE": str(tls_files.ca),
                "LOCKGUARD_LOCK_PATTERNS": "lock:*",
                "LOCKGUARD_DRY_RUN": "false",
            }
        )
        assert settings.endpoint == f"sentinel+tls://{s.addresses}/{s.name}"
        engine = build_engine(settings)
        plant_abandoned(s.primary())
        _, case = engine.scan("cli")
        assert case is not None
        primary = s.node(s.failover())
        assert engine.approve(case.id, "ann").counts == {"released": 1}
        assert primary.exists(b"lock:stuck") == 0

        wrong = build_engine(
            load_settings(
                {
                    "REDIS_SENTINELS": s.addresses,
                    "REDIS_SENTINEL_MASTER": s.name,
                    "REDIS_PASSWORD": PASSWORD,
                    "REDIS_TLS_CA_FILE": str(tls_files.other_ca),
                }
            )
        )
        with pytest.raises(RedisUnavailableError) as info:
            wrong.status()
        assert "REDIS_TLS_CA_FILE" in str(info.value)
        assert PASSWORD not in str(info.value)


def test_the_primary_killed_mid_scan_stops_the_scan_and_the_next_one_completes(
    sentinels: SentinelSet,
) -> None:
    """A scan whose primary dies under it stops with exit 3 and records nothing; once the
    sentinels have promoted the replica and the dead scan's lease has run out, the next scan
    (same Engine) sees every lock with the history the first scan left."""
    engine = engine_for(sentinels)
    with sentinels.primary().pipeline(transaction=False) as pipe:
        for i in range(20_000):
            pipe.set(f"lock:k:{i}", "t")
        pipe.execute()
    engine.scan("cli", propose=False)
    sentinels.replicate()  # the replica holds every lock and lease when the primary dies
    old = sentinels.primary_port()
    killed: list[int] = []

    def kill(_finding: object) -> None:
        if not killed:
            killed.append(old)
            sentinels.nodes[old].proc.kill()

    with pytest.raises(RedisUnavailableError) as err:
        engine.scan("cli", on_finding=kill, propose=False)
    assert killed
    assert err.value.exit_code == 3
    assert "sentinel://" in str(err.value)
    assert PASSWORD not in str(err.value)
    sentinels.nodes[old].proc.wait()
    new = sentinels.node(sentinels.wait_new_primary(old))
    # The dead scan's lease reached the replica: scans wait out its minute, saying so...
    busy = r"started by the CLI.*if that scan died, its lease ends within \d+s"
    with pytest.raises(ScanBusyError, match=busy):
        engine.scan("cli", propose=False)
    new.pexpire(SCAN_LEASE, 1)  # ...here, the minute passes at once
    time.sleep(0.01)
    result, _ = engine.scan("cli", propose=False, keep=100)
    assert result.scanned == 20_000
    assert {f.observations for f in result.worst} == {2}  # the stopped scan recorded nothing
