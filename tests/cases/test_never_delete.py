"""Never delete what is not an abandoned lock: each class of the defects seen on real servers,
with several examples each, end to end (scan -> case -> approve with dry run off)."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest
import redis

from bot import cli
from bot.cases.approval import approve
from bot.cases.case import State
from bot.cases.case_store import CaseStore
from bot.cases.decision import reject
from bot.cases.opening import scan_and_propose
from bot.cases.reclaim_config import ReclaimConfig
from bot.core.model import Reason
from bot.core.rules import Policy
from bot.scan.result import ScanOptions
from bot.store import keyspace
from bot.store.keyspace import locks_key, outcomes_key
from tests.bullmq_keys import plant_bullmq
from tests.cases.test_reclaim import Listener, dump
from tests.core.test_layouts import uuid1_hex
from tests.killed_approver import kill_mid_release

POLICY = Policy(stale_threshold_ms=500)  # short: each test waits PAST between its scans
OPTS = ScanOptions(patterns=[b"lock:*", b"bull:*", b"\x17*"], policy=POLICY)
LIVE = ReclaimConfig(dry_run=False, policy=POLICY, release_channel="locks:reclaimed")
PAST = 0.6  # past the threshold, with the same 100 ms to spare
REDISSON_FIELD = b"6f1c2c1e-6f3a-4a5b-9c1d-2b3c4d5e6f70:1"


def scans(  # type: ignore[no-untyped-def]
    r: redis.Redis, n: int = 2, cfg: ReclaimConfig = LIVE, opts: ScanOptions = OPTS
):
    """`n` scans PAST apart; the results and cases of each."""
    out = []
    for i in range(n):
        if i:
            time.sleep(PAST)
        out.append(scan_and_propose(r, opts, cfg, keep=10_000))
    return out


def plant_not_locks(r: redis.Redis) -> None:
    r.hset(b"lock:stats:acquisitions", mapping={b"total": 912, b"failed": 3})
    r.set(b"lock:count", 17)
    r.set(b"lock:flag", 1)
    r.set(b"lock:big", b"x" * (10 * 1024 * 1024))
    r.set(b"lock:cache:user:7", b'{"name": "ann"}', ex=3600)
    r.set(b"lock:note", b"do not delete me")
    r.rpush(b"lock:queue", b"a")
    r.sadd(b"lock:set", b"a")
    r.zadd(b"lock:zset", {b"a": 1})
    r.xadd(b"lock:stream", {b"a": b"1"})
    r.hset(b"lock:hash-of-redisson-looking-json", REDISSON_FIELD, b'{"x":1}')


def test_keys_that_are_not_locks_are_never_flagged_cased_or_deleted(r: redis.Redis) -> None:
    plant_not_locks(r)
    listener = Listener(r)
    before = dump(r)
    for result, case in scans(r, 3):
        assert case is None
        assert result.findings == 0  # exit code 0: nothing to look at
        assert result.by_reason[Reason.NOT_A_LOCK] == len(before)
        assert all(f.note for f in result.worst)  # each says why it is not a lock
    assert dump(r) == before
    assert listener.rest() == []


@pytest.mark.real
@pytest.mark.parametrize("prefix", [b"bull", b"{jobs}", b"myapp", b"app:jobs"])
@pytest.mark.parametrize("loose", [False, True], ids=["strict", "loose"])
def test_bullmq_key_set_only_its_job_locks_are_locks(
    real_redis: redis.Redis, prefix: bytes, loose: bool
) -> None:
    """Under any prefix, with a pattern over the whole queue: its deduplication key with a TTL
    (a job id, a counter lock's shape), its job hashes (no TTL: `infinite_ttl` if they were
    locks, as loose recognition took them) and the rest of BullMQ's keys are never in the case,
    and an approval of that case leaves every one of them exactly as it was."""
    policy = replace(POLICY, loose_recognition=loose)
    kinds = plant_bullmq(real_redis, prefix=prefix)
    for key in list(kinds):  # the workers died: their locks lost their TTL by hand, say
        if kinds[key] == "lock":
            real_redis.persist(key)
    opts = ScanOptions(patterns=[prefix + b":*"], policy=policy)
    cfg = replace(LIVE, policy=policy, patterns=tuple(opts.patterns))
    results = scans(real_redis, 2, cfg, opts)
    result, case = results[-1]
    seen = {f.key: f for f in result.worst}
    assert set(seen) == set(kinds)
    for key, kind in kinds.items():
        assert (seen[key].reason is Reason.NOT_A_LOCK) is (kind == "not_a_lock"), key
    assert case is not None
    locks = {k for k, v in kinds.items() if v == "lock"}
    assert {lk.key for lk in CaseStore(real_redis, retention_ms=1).get(case.id).locks} == locks
    before = {k: v for k, v in dump(real_redis).items() if k not in locks}
    rep = approve(real_redis, case.id, "ann", cfg)
    assert {o.lock.key: o.outcome for o in rep.outcomes} == dict.fromkeys(locks, "released")
    assert dump(real_redis) == before


def test_counter_lock_re_acquired_by_a_new_owner_is_not_deleted(r: redis.Redis) -> None:
    r.incr(b"lock:c")
    r.expire(b"lock:c", 600)
    _, case = scans(r, 2)[-1]
    assert case is not None
    assert case.lock_count == 1
    r.delete(b"lock:c")
    r.incr(b"lock:c")  # a new owner: the same count, a fresh TTL
    r.expire(b"lock:c", 600)
    before = dump(r)
    rep = approve(r, case.id, "ann", LIVE)
    assert [o.outcome for o in rep.outcomes] == ["skipped_reacquired"]
    assert dump(r) == before


@pytest.mark.parametrize("activity", ["hincrby", "new_field", "expire"])
def test_hash_lock_with_fresh_activity_is_not_deleted(r: redis.Redis, activity: str) -> None:
    r.hset(b"lock:orders", REDISSON_FIELD, 1)
    r.pexpire(b"lock:orders", 600_000)
    scans(r, 1)
    time.sleep(PAST)
    # below 2/3 of its lease with no renewal (as if minutes had passed): the watchdog is overdue
    r.pexpire(b"lock:orders", 300_000)
    _, case = scans(r, 1)[-1]
    assert case is not None
    if activity == "hincrby":
        r.hincrby(b"lock:orders", REDISSON_FIELD, 1)  # the holder re-entered
    elif activity == "new_field":
        r.hset(b"lock:orders", b"0a1b2c3d-0000-4000-8000-000000000001:7", 1)
    else:
        r.pexpire(b"lock:orders", 600_000)  # the watchdog renewed it
    before = dump(r)
    rep = approve(r, case.id, "ann", LIVE)
    assert rep.outcomes[0].outcome in ("skipped_reacquired", "recovered")
    assert dump(r) == before


@pytest.mark.parametrize("token", [b"live-owner-token", b"1b4e28ba2fa111d2883f0242ac110002"])
def test_no_ttl_lock_is_flagged_at_once_but_offered_only_past_the_threshold(
    r: redis.Redis, token: bytes
) -> None:
    r.set(b"lock:report", token)
    ((first, case1),) = scans(r, 1)
    assert first.by_reason[Reason.INFINITE_TTL] == 1  # flagged on first sight (exit 1)
    assert case1 is None
    assert "offered for release once held past" in first.worst[0].note
    time.sleep(PAST)
    _, case2 = scan_and_propose(r, OPTS, LIVE)
    assert case2 is not None
    assert case2.lock_count == 1


def test_a_rejection_sticks_until_the_identity_changes_or_the_snooze_passes(r: redis.Redis) -> None:
    r.set(b"lock:a", b"tok-a")
    r.set(b"lock:b", b"tok-b")
    _, case = scans(r, 2)[-1]
    assert case is not None
    assert case.lock_count == 2
    reject(r, case.id, "bob", "still in use", LIVE)
    for result, again in scans(r, 2):
        assert again is None  # no new message for what someone already said no to
        assert result.by_reason[Reason.INFINITE_TTL] == 2  # still shown
    r.set(b"lock:b", b"tok-b2")  # a new holder: a new identity
    _, case2 = scans(r, 2)[-1]
    assert case2 is not None
    assert [lk.key for lk in case2.locks] == [b"lock:b"]
    short = ReclaimConfig(dry_run=False, policy=POLICY, reject_snooze_ms=1)
    reject(r, case2.id, "bob", "no", short)
    time.sleep(0.01)
    _, case3 = scan_and_propose(r, OPTS, LIVE)
    assert case3 is not None
    assert [lk.key for lk in case3.locks] == [b"lock:b"]


@pytest.mark.real
def test_one_case_per_scan_at_any_size_and_every_lock_released_once(
    real_redis: redis.Redis,
) -> None:
    n = 1_234
    with real_redis.pipeline(transaction=False) as pipe:
        for i in range(n):
            pipe.set(f"lock:job:{i}".encode(), f"tok-{i}".encode())
        pipe.execute()
    listener = Listener(real_redis)
    results = scans(real_redis, 3)
    cases = [c for _, c in results if c is not None]
    assert len(cases) == 1
    assert cases[0].lock_count == n  # no 50-lock cap, no pile-up
    assert real_redis.llen(locks_key(cases[0].id)) == n
    rep = approve(real_redis, cases[0].id, "ann", LIVE)
    assert rep.released == n
    assert rep.errors == 0
    assert rep.case.state is State.RELEASED
    assert rep.case.outcome_counts == {"released": n}
    events = listener.rest()
    assert len(events) == n
    assert len({e["key_hex"] for e in events}) == n


def test_a_hand_edited_case_cannot_delete_what_would_not_be_proposed(r: redis.Redis) -> None:
    r.set(b"lock:a", b"tok-a")
    r.hset(b"lock:stats", mapping={b"total": 1})
    _, case = scans(r, 2)[-1]
    assert case is not None
    r.set(b"lock:live", b"live-tok")  # just taken by a live owner: no scan has seen it
    forged = []
    for key, ident, layout in (
        (b"lock:live", b"live-tok", "python_redis_lock"),
        (b"lock:stats", b"5:total,1:1,", "hash"),
    ):
        forged.append(
            json.dumps(
                {
                    "key_hex": key.hex(),
                    "key": key.decode(),
                    "layout": layout,
                    "identity_hex": ident.hex(),
                    "reason": "stale_lease",
                    "ttl_ms": -1,
                    "observed_ms": 0,
                    "held_seconds": 99999,
                    "owner": "",
                    "counter": None,
                    "type": "string" if layout == "string" else "hash",
                }
            )
        )
    r.rpush(locks_key(case.id), *forged)
    r.hincrby(keyspace.case_key(case.id), "lock_count", 2)
    before = {k: v for k, v in dump(r).items() if k != b"lock:a"}
    rep = approve(r, case.id, "ann", LIVE)
    outcomes = {o.lock.key: o.outcome for o in rep.outcomes}
    assert outcomes == {
        b"lock:a": "released",
        b"lock:live": "skipped_unproven",
        b"lock:stats": "skipped_unproven",
    }
    after = dump(r)
    # lock:a is python-redis-lock's naming: its release woke that library's waiters, as the
    # library's own unlock does (one element on lock-signal:a, gone within a second)
    assert r.lrange(b"lock-signal:a", 0, -1) == [b"1"]
    assert 0 < r.pttl(b"lock-signal:a") <= 1000
    del after[b"lock-signal:a"]
    assert after == before


@pytest.mark.real
def test_approve_exits_non_zero_and_the_case_stays_resumable_when_locks_error(
    real_redis: redis.Redis,
    redis_server: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A redis-py token minted 2 h ago: past the CLI's 900 s threshold on first sight.
    real_redis.set(b"lock:a", uuid1_hex(int(real_redis.time()[0]) * 1000 - 7_200_000))
    _, case = scans(real_redis, 1)[-1]
    assert case is not None
    real_redis.acl_setuser(
        "nodel",
        enabled=True,
        passwords=["+pw-x"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-del"],
    )
    try:
        port = redis_server.port  # type: ignore[attr-defined]
        monkeypatch.setenv("REDIS_URL", f"redis://nodel:pw-x@127.0.0.1:{port}/0")
        monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
        assert cli.main(["approve", case.id, "--by", "ann"]) == 3
        err = capsys.readouterr().err
        assert "could not be released" in err
        assert "--resume" in err
        assert "pw-x" not in err
        got = CaseStore(real_redis, retention_ms=1).get(case.id)
        assert got is not None
        assert got.state is State.INCOMPLETE
        assert real_redis.exists(b"lock:a") == 1
    finally:
        real_redis.acl_deluser("nodel")
    rep = approve(real_redis, case.id, "ann", LIVE, resume=True)
    assert rep.released == 1
    assert rep.case.state is State.RELEASED
    assert real_redis.exists(b"lock:a") == 0


@pytest.mark.real
def test_sigkilled_approval_then_resume_gives_exactly_one_event_per_released_lock(
    real_redis: redis.Redis, redis_server: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    n = 3_000
    old = uuid1_hex(int(real_redis.time()[0]) * 1000 - 7_200_000)  # past 900 s on first sight
    with real_redis.pipeline(transaction=False) as pipe:
        for i in range(n):
            pipe.set(f"lock:job:{i}".encode(), old[:-6] + f"{i:06x}".encode())
        pipe.execute()
    ((_, case),) = scans(real_redis, 1)
    assert case is not None
    assert case.lock_count == n
    listener = Listener(real_redis)
    env = {
        **os.environ,
        "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",  # type: ignore[attr-defined]
        "LOCKGUARD_DRY_RUN": "false",
    }
    kill_mid_release(real_redis, case.id, env, lock_count=n)
    rep = approve(real_redis, case.id, "ann", LIVE, resume=True)
    assert rep.counts == {"released": n}  # none re-labelled already_gone
    assert rep.case.state is State.RELEASED
    events = listener.drain(30, until=n)  # a loaded machine delivers 3,000 slowly
    events += listener.rest()  # and none more
    assert len(events) == n
    assert len({e["key_hex"] for e in events}) == n  # exactly one each, across both runs
    assert not any(real_redis.exists(f"lock:job:{i}") for i in range(0, n, 97))


def test_a_release_whose_reply_was_lost_is_re_read_not_guessed(
    r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.release import Outcome, Releaser, Result

    r.set(b"lock:a", b"tok-a")
    listener = Listener(r)
    _, case = scans(r, 2)[-1]
    assert case is not None
    real = Releaser.release_many

    def reply_lost(self: Releaser, items: list) -> list:  # type: ignore[type-arg]
        real(self, items)  # the scripts ran on the server...
        return [Result(t.key, Outcome.ERROR, "not released: Redis timed out") for t, _ in items]

    monkeypatch.setattr(Releaser, "release_many", reply_lost)
    rep = approve(r, case.id, "ann", LIVE)
    assert [o.outcome for o in rep.outcomes] == ["released"]  # ...and the case says so
    assert rep.case.state is State.RELEASED
    assert len(listener.rest()) == 1


@pytest.mark.real
def test_a_scan_that_cannot_open_its_case_is_a_clear_error_and_is_not_recorded(
    real_redis: redis.Redis,
    redis_server: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bot.store import scans

    real_redis.set(b"lock:a", uuid1_hex(int(real_redis.time()[0]) * 1000 - 7_200_000))
    real_redis.acl_setuser(
        "noeval",
        enabled=True,
        passwords=["+pw-e"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-@scripting"],
    )
    try:
        port = redis_server.port  # type: ignore[attr-defined]
        monkeypatch.setenv("REDIS_URL", f"redis://noeval:pw-e@127.0.0.1:{port}/0")
        assert cli.main(["scan"]) == 3
        err = capsys.readouterr().err
        assert "evalsha" in err.lower()
        assert "Traceback" not in err
        assert "pw-e" not in err
        assert scans.last_scan(real_redis) is None  # nothing recorded as done
        assert real_redis.get(b"lock:a") is not None
        monkeypatch.setenv("LOCKGUARD_AUTO_REMEDIATE", "false")
        assert cli.main(["scan"]) == 1  # scanning alone works, pipelined
    finally:
        real_redis.acl_deluser("noeval")


@pytest.mark.real
@pytest.mark.parametrize("acl", ["no_channels", "no_case_keys"])
def test_a_refusal_inside_the_release_script_never_leaves_it_half_done(
    real_redis: redis.Redis, redis_server: object, acl: str
) -> None:
    """A script error keeps the writes made before it: the release script records before it
    deletes, and nothing after the delete can fail."""

    real_redis.set(b"lock:a", b"tok-a")
    _, case = scans(real_redis, 2)[-1]
    assert case is not None
    # no_case_keys: it may decide the case (its hash) and audit, but not write the case's
    # outcomes, which the release script records before it deletes.
    rules = (
        ["+@all", "resetchannels", "allkeys"]
        if acl == "no_channels"
        else [
            "+@all",
            "allchannels",
            "resetkeys",
            "~lock:*",
            "%R~{lockguard}:*",
            "~{lockguard}:case:LG-??????-??????",
            "%W~{lockguard}:audit",
        ]
    )
    real_redis.execute_command("ACL", "SETUSER", "narrow", "on", ">pw-n", *rules)
    listener = Listener(real_redis)
    try:
        narrow = redis_server.client(username="narrow", password="pw-n")  # type: ignore[attr-defined]
        rep = approve(narrow, case.id, "ann", LIVE)
        narrow.close()
    finally:
        real_redis.acl_deluser("narrow")
    if acl == "no_case_keys":
        assert [o.outcome for o in rep.outcomes] == ["error"]
        assert "NOPERM" in rep.outcomes[0].detail
        assert real_redis.get(b"lock:a") == b"tok-a"  # untouched: nothing half-done
        assert real_redis.hlen(outcomes_key(case.id)) == 0
        assert rep.case.state is State.INCOMPLETE  # and `--resume` can finish it
        assert listener.rest() == []
        resumed = approve(real_redis, case.id, "ann", LIVE, resume=True)
        assert resumed.counts == {"released": 1}
        assert len(listener.rest()) == 1
    else:
        outcome = rep.outcomes[0]
        assert outcome.outcome == "released"
        assert not outcome.event_published
        assert "NOT published" in outcome.detail
        assert real_redis.exists(b"lock:a") == 0
        assert rep.case.outcome_counts == {"released": 1}
        assert listener.rest() == []
