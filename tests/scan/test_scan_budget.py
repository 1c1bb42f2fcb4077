"""The scan budget (`LOCKGUARD_SCAN_BUDGET`) as a user meets it: a real redis-server scanned to a
small budget takes proportionally longer, keeps lockguard's share of Redis's own accounting
(`INFO commandstats`) within it, and still finds every lock; the scan says it was paced (JSON,
the CLI table, the Slack footer); releases wait for the same budget; a bad value is exit 2
naming the variable and what is expected; `lockguard config` shows it."""

from __future__ import annotations

import io
import json
import time
from collections import Counter

import pytest
import redis
from redis.cluster import RedisCluster

from bot.cases.approval import approve
from bot.cases.opening import scan_and_propose
from bot.cases.reclaim_config import ReclaimConfig
from bot.cli import main
from bot.config import load_settings
from bot.core.errors import ConfigError
from bot.core.model import Layout, Reason
from bot.core.pacing import BUDGET_EXPECTED, DEFAULT_BUDGET, UNPACED, Pacer
from bot.core.rules import Policy
from bot.release import ApprovedLock, Outcome, Releaser
from bot.report.scan import table
from bot.scan import ReadMode, Scanner, loop
from bot.scan.cluster_scanner import ClusterScanner
from bot.scan.loop import run_scan
from bot.scan.result import ScanOptions, ScanResult
from bot.slack.blocks.findings import findings_message, healthy_message
from bot.store import keyspace, scans
from bot.store.scans import server_ms
from tests.block_kit import check_message
from tests.conftest import RedisServer

LOCKS = 10_000
#: Small enough that the paced scan must wait: lockguard's scripts use 10-30% of Redis's
#: time unpaced on this machine, so 0.03 makes the scan at least ~3x longer.
SMALL_BUDGET = 0.03


def fill(client: redis.Redis, locks: int) -> None:
    with client.pipeline(transaction=False) as pipe:
        for i in range(locks):
            pipe.set(b"lock:%d" % i, b"token-%d" % i, px=3_600_000)
            pipe.set(b"other:%d" % i, b"not under the pattern")
        pipe.execute()


def lockguard_server_s(client: redis.Redis) -> float:
    """The server time Redis itself counted for lockguard's scripts and lease writes."""
    stats = client.info("commandstats")
    return sum(stats.get(f"cmdstat_{c}", {}).get("usec", 0) for c in ("evalsha", "hset")) / 1e6


def scan(client: redis.Redis, budget: float) -> tuple[ScanResult, float]:
    before = lockguard_server_s(client)
    result = run_scan(
        client, ScanOptions([b"lock:*"], Policy(stale_threshold_ms=900_000), budget=budget)
    )
    return result, lockguard_server_s(client) - before


def test_a_small_budget_scan_takes_proportionally_longer_and_finds_every_lock(
    redis_server: RedisServer, real_redis: redis.Redis
) -> None:
    filled = LOCKS
    fill(real_redis, filled)
    unpaced, _ = scan(real_redis, UNPACED)
    while unpaced.duration_seconds < 0.3 and filled < 64 * LOCKS:  # a faster machine: more keys
        filled *= 2  # (filling LOCKS * 2 each time wrote the same keys again: it never ended)
        fill(real_redis, filled)
        unpaced, _ = scan(real_redis, UNPACED)
    locks = unpaced.scanned
    assert unpaced.paced == {"budget": 1.0, "waited_seconds": 0.0, "fraction": 0.0}

    paced, server_s = scan(real_redis, SMALL_BUDGET)

    assert paced.scanned == locks  # every lock found, each once
    assert paced.by_reason == Counter({Reason.HEALTHY: locks})
    assert paced.duration_seconds >= 3 * unpaced.duration_seconds
    # Redis's own accounting: lockguard held it at most about the budget of the scan's time.
    assert server_s / paced.duration_seconds <= SMALL_BUDGET * 1.5
    summary = paced.summary()["paced"]
    assert isinstance(summary, dict)
    assert summary["budget"] == SMALL_BUDGET
    assert 0 < summary["waited_seconds"] < paced.duration_seconds
    assert summary["fraction"] == pytest.approx(
        paced.waited_seconds / paced.duration_seconds, abs=0.001
    )
    assert paced.paced_words().startswith("paced: ") == (paced.waited_seconds >= 0.5)


def test_an_unpaced_scan_reads_in_fewer_longer_calls_and_finds_the_same_locks(
    real_redis: redis.Redis,
) -> None:
    """Budget `off` sizes each call for about 1 ms instead of 0.5 ms (`batch_size.target_for`):
    fewer batches for the same locks, each found once."""
    fill(real_redis, 2 * LOCKS)

    def calls(budget: float) -> tuple[ScanResult, int]:
        real_redis.config_resetstat()
        result, _ = scan(real_redis, budget)
        return result, int(real_redis.info("commandstats")["cmdstat_evalsha"]["calls"])

    scan(real_redis, DEFAULT_BUDGET)  # every lock has its tenure record: the second scan's state
    paced, paced_calls = calls(DEFAULT_BUDGET)
    unpaced, unpaced_calls = calls(UNPACED)

    assert paced.scanned == unpaced.scanned == 2 * LOCKS
    assert paced.by_reason == unpaced.by_reason == Counter({Reason.HEALTHY: 2 * LOCKS})
    assert unpaced_calls <= 0.75 * paced_calls


def result_of(waited: float, duration: float, budget: float = 0.25) -> ScanResult:
    res = ScanResult(scanned=3, duration_seconds=duration, budget=budget, waited_seconds=waited)
    res.by_reason[Reason.HEALTHY] = 3
    return res


@pytest.mark.parametrize(
    ("waited", "duration", "words"),
    [
        (
            1.2,
            10.0,
            "paced: waited 1.2 s of 10.0 s (12%) so that lockguard used at most 0.25 of "
            "Redis's time (LOCKGUARD_SCAN_BUDGET)",
        ),
        (0.001, 10.0, ""),  # too short to notice
        (0.026, 0.05, ""),  # half of a 0.05 s scan: no news either
        (0.0, 10.0, ""),
    ],
)
def test_the_summary_says_how_long_the_scan_waited_for_the_budget(
    waited: float, duration: float, words: str
) -> None:
    res = result_of(waited, duration)
    assert res.paced_words() == words
    line = words or "paced:"  # not paced: no such line at all
    head = table(res, "localhost:6379", ["lock:*"])
    assert any(x.startswith(line) for x in head.splitlines()) == bool(words)
    for msg in (
        healthy_message(res, endpoint="localhost:6379"),
        findings_message(
            res,
            None,
            endpoint="localhost:6379",
            dry_run=True,
            auto_remediate=False,
            approvers_note="",
        ).message,
    ):
        check_message(msg)
        footer = [b for b in msg["blocks"] if b["type"] == "context"][-1]
        assert (line in json.dumps(footer)) == bool(words)
    body = json.loads(json.dumps(res.summary()))
    assert body["paced"] == {
        "budget": 0.25,
        "waited_seconds": round(waited, 3),
        "fraction": round(waited / duration, 3),
    }


def test_releases_wait_for_the_budget_after_each_pipeline(real_redis: redis.Redis) -> None:
    slept: list[float] = []
    pacer = Pacer(0.25, sleep=slept.append)
    real_redis.set(b"lock:a", b"tok", px=60_000)
    ttl_ms = int(real_redis.pttl(b"lock:a"))
    target = ApprovedLock(b"lock:a", Layout.STRING, b"tok", ttl_ms, server_ms(real_redis))
    releaser = Releaser(real_redis, pacer=pacer)
    assert releaser.release(target).outcome is Outcome.RELEASED
    assert len(slept) == 1
    assert slept[0] == pytest.approx(3 * pacer.busy_s)
    unpaced = Releaser(real_redis, pacer=Pacer(UNPACED, sleep=slept.append))
    unpaced.release(target)
    assert len(slept) == 1  # off: never waits


def test_the_setting_reaches_the_scan_and_the_release() -> None:
    settings = load_settings({"LOCKGUARD_SCAN_BUDGET": "0.1"})
    assert settings.scan_options().budget == 0.1
    assert settings.reclaim_config().budget == 0.1
    assert load_settings({}).scan_budget == DEFAULT_BUDGET
    assert load_settings({"LOCKGUARD_SCAN_BUDGET": "off"}).scan_budget == UNPACED


@pytest.mark.parametrize("value", ["0", "1.5", "-1", "quarter", "nan", ""])
def test_a_bad_budget_is_named_with_what_is_expected(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"LOCKGUARD_SCAN_BUDGET": value})
    assert f"LOCKGUARD_SCAN_BUDGET: expected {BUDGET_EXPECTED}" in str(info.value)
    assert info.value.exit_code == 2


def test_scan_with_a_bad_budget_is_exit_2_before_redis_is_touched(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], closed_port: int
) -> None:
    monkeypatch.setenv("REDIS_PORT", str(closed_port))  # never reached: refused before
    monkeypatch.setenv("LOCKGUARD_SCAN_BUDGET", "2")
    out = io.StringIO()
    assert main(["scan"], out=out) == 2
    assert out.getvalue() == ""
    assert "LOCKGUARD_SCAN_BUDGET: expected a fraction of Redis's time in (0, 1]" in (
        capsys.readouterr().err
    )


def test_lockguard_config_shows_the_budget(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = io.StringIO()
    assert main(["config", "--json"], out=out) == 0
    by_name = {s["name"]: s for s in json.loads(out.getvalue())["settings"]}
    assert by_name["LOCKGUARD_SCAN_BUDGET"] == {
        "name": "LOCKGUARD_SCAN_BUDGET",
        "value": 0.5,
        "source": "default",
        "secret": False,
    }
    monkeypatch.setenv("LOCKGUARD_SCAN_BUDGET", "off")
    out = io.StringIO()
    assert main(["config", "--json"], out=out) == 0
    by_name = {s["name"]: s for s in json.loads(out.getvalue())["settings"]}
    assert by_name["LOCKGUARD_SCAN_BUDGET"]["value"] == 1.0
    assert by_name["LOCKGUARD_SCAN_BUDGET"]["source"] == "environment"


def test_each_cluster_primary_is_paced_on_its_own_server_time(rc: RedisCluster) -> None:
    with rc.pipeline(transaction=False) as pipe:
        for i in range(3000):
            pipe.set(f"lock:job:{i}", f"t{i}", px=3_600_000)
        pipe.execute()
    pacers: list[Pacer] = []
    slept: list[float] = []

    def pacer() -> Pacer:
        pacers.append(Pacer(0.25, sleep=slept.append))
        return pacers[-1]

    token, gen = scans.begin_scan(rc)
    try:
        scanner = ClusterScanner(rc, gen, pacer=pacer)
        found = 0
        for batch in scanner.batches([b"lock:*"]):
            found += len(batch)
            scanner.write_tenures({snap.key: b"" for snap, _ in batch})
    finally:
        scans.abort_scan(rc, token, gen)
    assert found == 3000
    assert len(pacers) == len(scanner.nodes) == 3  # one budget per primary
    assert [n.scanner.pacer for n in scanner.nodes] == pacers
    assert all(p.busy_s > 0 for p in pacers)  # each measured on its own primary's calls
    assert slept  # and each waited for its own share


@pytest.mark.parametrize("mode", [ReadMode.LUA, ReadMode.PIPELINE])
def test_both_read_modes_wait_for_the_budget(real_redis: redis.Redis, mode: ReadMode) -> None:
    fill(real_redis, 500)
    slept: list[float] = []
    pacer = Pacer(0.25, sleep=slept.append)
    scanner = Scanner(real_redis, mode=mode, pacer=pacer)
    table_now = keyspace.tenure_table(1)
    found = sum(len(b) for b in scanner.batches([b"lock:*"], keyspace.tenure_table(0), table_now))
    assert found == 500
    assert scanner.mode is mode
    assert pacer.busy_s > 0
    assert slept
    assert sum(slept) == pytest.approx(pacer.waited_s)


def test_a_paced_scan_renews_its_lease_while_it_waits(
    real_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No key matches, so no batch ever reaches the scan loop: only the waits renew the lease
    (a paced scan of a big sparse keyspace can outlast the 60 s lease otherwise)."""
    with real_redis.pipeline(transaction=False) as pipe:
        for i in range(5000):
            pipe.set(b"other:%d" % i, b"x")
        pipe.execute()
    renewed: list[bytes] = []
    refresh = scans.refresh_scan

    def spy(client: redis.Redis, token: bytes) -> bool:
        renewed.append(token)
        return refresh(client, token)

    monkeypatch.setattr(loop, "REFRESH_EVERY_S", 0.0)
    monkeypatch.setattr(scans, "refresh_scan", spy)
    result = run_scan(
        real_redis, ScanOptions([b"lock:*"], Policy(stale_threshold_ms=900_000), budget=0.05)
    )
    assert result.scanned == 0
    assert result.waited_seconds > 0
    assert renewed  # renewed during the waits, with no batch in between


def test_an_approval_releases_at_the_budget(real_redis: redis.Redis) -> None:
    r = real_redis
    r.set(b"lock:no-ttl", b"b64tokenb64tokenb64token")
    policy = Policy(stale_threshold_ms=1_000)
    opts = ScanOptions(patterns=[b"lock:*"], policy=policy, budget=0.25)
    cfg = ReclaimConfig(dry_run=False, policy=policy, patterns=(b"lock:*",), budget=0.25)
    scan_and_propose(r, opts, cfg)
    time.sleep(1.1)
    _, case = scan_and_propose(r, opts, cfg)
    assert case is not None
    pauses: list[float] = []
    pause = Pacer.pause

    def spy(self: Pacer, busy_s: float) -> None:
        pauses.append(self.budget)
        pause(self, busy_s)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Pacer, "pause", spy)
        assert approve(r, case.id, "ann", cfg).released == 1
    assert pauses
    assert set(pauses) == {0.25}  # the release and its verification, at the budget
    assert not r.exists(b"lock:no-ttl")


def test_the_pacer_counts_what_redis_counts_and_the_share_holds(
    real_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tenure writes ride behind the scripts and each script costs more than it measured
    itself: the pacer counts both, so its account of lockguard's server time is Redis's own
    (`INFO commandstats`), and the share at the default budget stays within it."""
    fill(real_redis, 30_000)
    made: list[Pacer] = []
    init = Pacer.__init__

    def spy(self: Pacer, *args: object, **kwargs: object) -> None:
        init(self, *args, **kwargs)  # type: ignore[arg-type]
        made.append(self)

    monkeypatch.setattr(Pacer, "__init__", spy)
    for _ in range(2):  # the first scan (every lease new), then one continuing its leases
        made.clear()
        result, server_s = scan(real_redis, DEFAULT_BUDGET)
        assert result.scanned == 30_000
        counted = sum(p.busy_s for p in made)
        assert 0.9 * server_s <= counted <= 1.5 * server_s
        assert server_s / result.duration_seconds <= DEFAULT_BUDGET * 1.1
