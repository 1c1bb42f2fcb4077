"""The deadlock check as docs/acl.md's least-privilege users: with the page's optional evidence
lines either user's scan finds a planted Redisson fair-lock cycle, and the full guard releases the
proposed lock after the cycle is read again; without them the scan goes on and says the check
was not made."""

from __future__ import annotations

import json

import pytest
import redis

from tests.conftest import RedisServer
from tests.evidence.test_deadlock import A, B, C, hold, queue
from tests.store.test_refusals import run
from tests.test_acl import acl_server as acl_server  # the fixture
from tests.test_acl import admin as admin  # the fixture
from tests.test_acl import doc_acl, doc_evidence_acl, login
from tests.test_acl import env as env  # the fixture

pytestmark = pytest.mark.real


def plant_cycle(r: redis.Redis) -> None:
    hold(r, b"lock:a", A)
    hold(r, b"lock:b", B)
    queue(r, b"lock:a", B)
    queue(r, b"lock:b", A, C)


@pytest.mark.parametrize("granted", [True, False], ids=["evidence-line", "without"])
@pytest.mark.parametrize("user", ["lockguard", "lockguard-scanner"])
def test_the_check_needs_the_optional_line_and_the_scan_goes_on_without(
    capsys: pytest.CaptureFixture[str],
    env: pytest.MonkeyPatch,
    acl_server: RedisServer,
    admin: redis.Redis,
    user: str,
    granted: bool,
) -> None:
    base = doc_acl()[user]
    extra = [w for words in doc_evidence_acl() if words[0] == user for w in words[1:]]
    extra = [w for w in extra if w != "+client|no-touch"]  # 7.2+ only; refused reads are fine
    try:
        if granted:
            admin.execute_command("ACL", "SETUSER", user, *extra)
        plant_cycle(admin)
        login(env, acl_server, user)
        if user == "lockguard-scanner":  # it only scans (docs/acl.md): it opens no case
            env.setenv("LOCKGUARD_AUTO_REMEDIATE", "false")
        code, out, err = run(capsys, "scan", "--json")
        assert out, err
        doc = json.loads(out)
        released = None
        if granted and user == "lockguard":
            case_id = doc["case"]["case_id"]
            released = run(capsys, "approve", case_id, "--by", "ann")
    finally:
        admin.execute_command("ACL", "SETUSER", *base)  # the documented line again (reset)
    found = [f for f in doc["findings"] if f["reason"] == "deadlock"]
    if granted:
        assert code == 1, err
        assert [f["key"] for f in found] == ["lock:b"]
        assert doc["deadlocks"]["cycles"] == 1
    else:
        assert code == 0, err  # both locks healthy; nothing else to report
        assert found == []
        assert doc["deadlocks"]["note"] == (
            "deadlocks not checked: a queue read was refused (NoPermissionError)"
        )
    if released is not None:
        assert released[0] == 0, released
        assert "1 of 1 lock(s) released" in released[1]
        assert admin.exists(b"lock:b") == 0
        assert admin.hgetall(b"lock:a") == {A: b"1"}


def test_a_guard_that_may_not_read_the_cycle_again_releases_nothing(
    capsys: pytest.CaptureFixture[str],
    env: pytest.MonkeyPatch,
    acl_server: RedisServer,
    admin: redis.Redis,
) -> None:
    base = doc_acl()["lockguard"]
    extra = [w for words in doc_evidence_acl() if words[0] == "lockguard" for w in words[1:]]
    extra = [w for w in extra if w not in ("+client|no-touch", "+hexists")]
    try:
        admin.execute_command("ACL", "SETUSER", "lockguard", *extra, "-hexists")
        plant_cycle(admin)
        before = {k: admin.dump(k) for k in admin.scan_iter() if b"lockguard" not in k}
        login(env, acl_server, "lockguard")
        code, out, err = run(capsys, "scan", "--json")
        assert code == 1, err
        code, text, err = run(capsys, "approve", json.loads(out)["case"]["case_id"], "--by", "ann")
    finally:
        admin.execute_command("ACL", "SETUSER", *base)
    assert "0 of 1 lock(s) released" in text, text + err
    assert "could not read its deadlock's cycle again (NoPermissionError)" in text
    assert {k: admin.dump(k) for k in admin.scan_iter() if b"lockguard" not in k} == before
