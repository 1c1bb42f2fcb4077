"""As a Redis user refused SCAN (and scripting), a scan fails at once and no lease of
lockguard's outlives it: the CLI and `serve` never wait on lockguard's own lease."""

from __future__ import annotations

import logging
import time

import pytest
import redis

from bot.store import keyspace, migration
from tests.conftest import RedisServer
from tests.ops.test_ops_serve import metrics
from tests.slack_app_harness import Factory
from tests.slack_app_harness import slack_app as slack_app  # the fixture
from tests.store.test_refusals import run
from tests.test_acl import (
    FAST,
    NO_SCAN_NO_SCRIPTS,
    events,
    plant,
)
from tests.test_acl import acl_server as acl_server  # the fixture
from tests.test_acl import admin as admin  # the fixture
from tests.test_acl import env as env  # the fixture


def leftover_leases(admin: redis.Redis) -> list[bytes]:
    """lockguard's own leases still in Redis: the migration's, the scan's, the leader's."""
    own = admin.keys(b"{lockguard}:*") + admin.keys(b"{lockguard:*")
    return sorted(k for k in own if b"lease" in k or k in (keyspace.MIGRATING, keyspace.LEADER))


@pytest.mark.parametrize("scripts", [False, True], ids=["no-scripts", "scripts"])
@pytest.mark.parametrize("migrated", [False, True], ids=["new-redis", "migrated"])
def test_a_refused_scan_fails_at_once_and_leaves_no_lease_behind(
    env: pytest.MonkeyPatch,
    acl_server: RedisServer,
    admin: redis.Redis,
    capsys: pytest.CaptureFixture[str],
    migrated: bool,
    scripts: bool,
) -> None:
    """A user without SCAN and scripting (`+@all -scan -@scripting`), or without SCAN only (the
    batch script's SCAN is refused): each scan is refused in milliseconds with the refused
    command named, no lease of lockguard's outlives it (the migration's, on a new Redis, nor the
    scan's), and the next scan does not wait on one."""
    assert admin.execute_command("ACL", "SETUSER", *NO_SCAN_NO_SCRIPTS) == b"OK"
    if scripts:
        assert admin.execute_command("ACL", "SETUSER", "lockguard-blind", "+@scripting") == b"OK"
    plant(admin)
    if migrated:
        admin.set(keyspace.KEYSPACE, keyspace.FORMAT)
    env.setenv(
        "REDIS_URL", f"redis://lockguard-blind:change-me-blind@127.0.0.1:{acl_server.port}/0"
    )
    try:
        for attempt in range(3):
            started = time.monotonic()
            code, out, err = run(capsys, "scan")
            elapsed = time.monotonic() - started
            assert code == 3, (attempt, out, err)
            assert "refused the 'scan' command for this ACL user (NOPERM)" in err, err
            assert "another lockguard process" not in err
            assert elapsed < 2.0, (attempt, elapsed, err)
            assert leftover_leases(admin) == [], attempt
    finally:
        admin.execute_command("ACL", "DELUSER", "lockguard-blind")


def test_serve_as_a_user_without_scan_and_scripts_never_stalls_on_its_own_lease(
    slack_app: Factory,
    redis_server: RedisServer,
    real_redis: redis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`serve` as `+@all -scan -@scripting`: every scheduled scan (each second) is refused with
    NOPERM at once, none waits on lockguard's own migration lease, and that lease is never left
    behind; the leader lease, whose script is refused, is renewed and given back all the same."""
    caplog.set_level(logging.INFO, logger="lockguard")
    real_redis.execute_command("ACL", "SETUSER", *NO_SCAN_NO_SCRIPTS)
    try:
        url = f"redis://lockguard-blind:change-me-blind@127.0.0.1:{redis_server.port}/0"
        app = slack_app(tuning=FAST, LOCKGUARD_SCAN_SCHEDULE="every 1s", REDIS_URL=url)
        app.plant(b"lock:stuck")
        failed = ("lockguard_scans_total", (("outcome", "failed"), ("trigger", "schedule")))
        deadline = time.monotonic() + 10
        while metrics(app).get(failed, 0) < 4:  # a 30 s wait on the migration lease: at most 1
            assert time.monotonic() < deadline, caplog.text
            held = real_redis.pttl(keyspace.MIGRATING)  # -2: none; else taken this second
            assert held == -2 or held > migration.LEASE_MS - 1000, "the migration lease was kept"
            time.sleep(0.05)
        assert "another lockguard process" not in caplog.text
        assert real_redis.exists(keyspace.LEADER)
        app.served.stop()
        assert not {"leader_renew_failed", "leader_lost", "leader_release_failed"} & set(
            events(caplog)
        ), caplog.text
        assert leftover_leases(real_redis) == []
    finally:
        real_redis.execute_command("ACL", "DELUSER", "lockguard-blind")
