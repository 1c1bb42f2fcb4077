"""docs/acl.md's optional ACL lines for the impact evidence: with them, either user's scan reads
exact waiters and backlog; without them, those are null with the reason and the scan goes on."""

from __future__ import annotations

import json

import pytest
import redis

from tests.conftest import RedisServer
from tests.slack_app_harness import slack_app as slack_app  # the fixture
from tests.store.test_refusals import run
from tests.test_acl import (
    REDISSON_FIELD,
    doc_acl,
    doc_evidence_acl,
    login,
)
from tests.test_acl import acl_server as acl_server  # the fixture
from tests.test_acl import admin as admin  # the fixture
from tests.test_acl import env as env  # the fixture


def server_at_least(r: redis.Redis, major: int, minor: int) -> bool:
    version = str(r.info("server")["redis_version"])
    return tuple(int(p) for p in version.split(".")[:2]) >= (major, minor)


@pytest.mark.parametrize("granted", [True, False], ids=["evidence-line", "without"])
@pytest.mark.parametrize("user", ["lockguard", "lockguard-scanner"])
def test_the_impact_evidence_is_exact_with_the_documented_optional_line_and_null_without(
    capsys: pytest.CaptureFixture[str],
    env: pytest.MonkeyPatch,
    acl_server: RedisServer,
    admin: redis.Redis,
    user: str,
    granted: bool,
) -> None:
    """A Redisson lock with 3 waiters on its channel and 2 in its fair-lock queue, and a BullMQ
    job lock whose worker is gone with 4 jobs queued: exact with the optional line; without it
    null, with the reason, and the scan goes on. The BullMQ job locks are a pattern of their own
    (`~bull:*:lock`, the scanner `%R~bull:*:lock`, as the section says for any pattern)."""
    base = doc_acl()[user]
    extra = [w for words in doc_evidence_acl() if words[0] == user for w in words[1:]]
    assert "+client|list" in extra
    assert "%R~bull:*:wait" in extra
    if not server_at_least(admin, 7, 2):
        extra = [w for w in extra if w != "+client|no-touch"]  # the section: 7.2 and later only
    grants = [user, "%R~bull:*:lock" if user == "lockguard-scanner" else "~bull:*:lock"]
    waiters: list[redis.client.PubSub] = []
    try:
        admin.execute_command("ACL", "SETUSER", *grants, *(extra if granted else []))
        admin.hset(b"lock:settle", REDISSON_FIELD, b"1")
        queued = [REDISSON_FIELD[:-2] + b"%d" % t for t in (91, 92)]
        admin.rpush(b"redisson_lock_queue:{lock:settle}", *queued)
        for _ in range(3):
            p = acl_server.client().pubsub()
            p.subscribe(b"redisson_lock__channel:{lock:settle}")
            assert p.get_message(timeout=2) is not None
            waiters.append(p)
        admin.set(b"bull:emails:7:lock", b"0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d:7")
        admin.lpush(b"bull:emails:wait", b"100", b"101")
        admin.lpush(b"bull:emails:paused", b"200")
        admin.zadd(b"bull:emails:prioritized", {b"300": 1 << 32})
        login(env, acl_server, user)
        env.setenv("LOCKGUARD_LOCK_PATTERNS", "lock:*,bull:*:lock")
        env.setenv("LOCKGUARD_AUTO_REMEDIATE", "false")
        code, out, err = run(capsys, "scan", "--json")
    finally:
        for p in waiters:
            p.close()
        admin.execute_command("ACL", "SETUSER", *base)  # the documented line again (reset)
    assert code == 1, err
    found = {f["key"]: f["impact"] for f in json.loads(out)["findings"]}
    redisson, bull = found["lock:settle"], found["bull:emails:7:lock"]
    if granted:
        assert redisson["waiters"] == 5
        assert bull["backlog"] == 4
        assert bull["owner_alive"] is False
        assert bull["owner_evidence"] == "no worker connected to queue `emails`"
    else:
        assert redisson["waiters"] is None
        assert redisson["owner_evidence"] == (
            "waiters not read (the server refused PUBSUB NUMSUB or LLEN)"
        )
        assert bull["backlog"] is None
        assert bull["owner_alive"] is None
        assert bull["owner_evidence"] == "CLIENT LIST refused: this Redis user may not run it (ACL)"
