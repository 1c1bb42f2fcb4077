"""`lockguard check`: Redis answers, when the last scan ran (UTC time and age), and whether
scans are overdue against LOCKGUARD_SCAN_SCHEDULE (twice its interval, as `/healthz` says)."""

from __future__ import annotations

import json
import re

import pytest
import redis

from bot.core.clock import text_utc
from bot.store.keyspace import LAST_SCAN
from tests.test_cli_scan_notes import env as env  # the fixture
from tests.test_cli_scan_notes import run


def age_last_scan(r: redis.Redis, seconds: int) -> int:
    """Make the recorded last scan `seconds` older; returns its new server time (ms)."""
    summary = json.loads(r.get(LAST_SCAN))  # type: ignore[arg-type]
    summary["server_time_ms"] -= seconds * 1000
    r.set(LAST_SCAN, json.dumps(summary))
    return int(summary["server_time_ms"])


def test_check_says_when_the_last_scan_ran_and_that_scans_are_on_time(env: redis.Redis) -> None:
    env.set(b"lock:x", b"t")
    env.rpush(b"lock:queue", b"job")
    run("scan")
    code, text = run("check")
    assert code == 0
    [last] = [ln for ln in text.splitlines() if ln.startswith("last scan:")]
    m = re.fullmatch(
        r"last scan: 1 lock\(s\), 1 finding\(s\) \(and 1 key\(s\) that are not locks\), "
        r"at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC) \((\d+)s ago\)",
        last,
    )
    assert m, last
    assert int(m.group(2)) <= 2
    assert (
        "scans: on time (schedule cron */15 * * * * (UTC); overdue after 30m00s without a scan)"
        in text
    )


def test_check_says_scans_are_overdue_with_the_age(env: redis.Redis) -> None:
    env.set(b"lock:x", b"t", px=600_000)
    run("scan")
    at = age_last_scan(env, 2 * 3600 + 5 * 60)
    code, text = run("check")
    assert code == 0  # Redis answers: the overdue scans are said, not an exit code
    assert f"at {text_utc(at)} (2h05m ago)" in text
    assert (
        "scans: OVERDUE: no scan has completed for 2h05m (schedule cron */15 * * * * (UTC); "
        "overdue after 30m00s without a scan; `lockguard serve` runs LOCKGUARD_SCAN_SCHEDULE)"
    ) in text


def test_check_with_no_scan_yet_and_a_schedule_is_overdue(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKGUARD_SCAN_SCHEDULE", "every 30s")
    env.set(b"{lockguard}:leader", b"replica-1", px=60_000)  # a `serve` leads: scans are due
    code, text = run("check")
    assert code == 0
    assert "last scan: none recorded yet" in text
    assert "scans: OVERDUE: no scan recorded yet (schedule every 30s; overdue after 1m00s" in text


def test_a_first_check_on_a_redis_never_scanned_nor_served_is_not_an_alarm(
    env: redis.Redis,
) -> None:
    code, text = run("check")
    assert code == 0
    assert "last scan: none recorded yet" in text
    assert "scans: none yet and no `lockguard serve` running (schedule cron */15" in text
    assert "OVERDUE" not in text


def test_check_with_scans_off_has_nothing_overdue(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKGUARD_SCAN_SCHEDULE", "off")
    run("scan")
    age_last_scan(env, 86_400 * 3)
    code, text = run("check")
    assert code == 0
    assert "(3d00h ago)" in text
    assert "scans: not scheduled (LOCKGUARD_SCAN_SCHEDULE=off): none can be overdue" in text
    assert "OVERDUE" not in text
