"""Evidence for real BullMQ locks: the queues, jobs, locks and worker connections here are made by
BullMQ itself (node, tests/node/bullmq_worker.mjs, both pinned majors) on a real redis-server,
then read through `lockguard scan --json`.

A worker is SIGKILLed while it holds a job: its lock `<prefix>:<queue>:<id>:lock` stays (a long
lockDuration, so it is still there at the scans) and jobs still wait behind it. Beside it a live
worker of another queue holds a job lock it renews. lockguard needs two scans to judge a lock with
a TTL (renewed or not?) and the threshold's age: between them the test backdates lockguard's own
tenure records, as an admin could (tests/test_acl.py `backdate`), and waits for one real renewal
of the live lock. The live workers are frozen (SIGSTOP: still connected, writing nothing: no
renewal, no stalled check) while the second scan runs, so the DUMP of every BullMQ key before
and after shows what lockguard changed: nothing.

Also: a named worker and a custom prefix, a job scheduler's job lock (its id holds `:`), BullMQ
on a Redis Cluster, and a pattern over a whole queue (only job locks are locks).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from bot.core import tenures
from bot.store import scans, tenure_plan
from tests.embedded_cluster import EmbeddedCluster
from tests.evidence.test_evidence import by_key, dumps, env, scan_json
from tests.evidence.test_evidence_cluster import dumps as cluster_dumps
from tests.node.bullmq import BullMQ, jobs
from tests.test_acl import TWO_HOURS_MS, backdate
from tests.test_cli_scan_notes import run

__all__ = ["env"]  # the fixture, imported from test_evidence

HOUR_MS = 3_600_000
PREFIX = "{jobs}"


def worker_names(r: redis.Redis | RedisCluster) -> set[str]:
    """The names of the connections to `r` (to any primary of a cluster)."""
    if isinstance(r, RedisCluster):
        lists = [r.get_redis_connection(n).client_list() for n in r.get_primaries()]
    else:
        lists = [r.client_list()]
    return {str(c.get("name", "")) for clients in lists for c in clients}


def wait_connected(r: redis.Redis | RedisCluster, name: str, *, connected: bool = True) -> None:
    """Until a connection named `name` is there (or, with `connected` False, until Redis has
    dropped it: a SIGKILLed worker's socket closes a moment after the kill)."""
    deadline = time.monotonic() + 10
    while (name in worker_names(r)) != connected:
        assert time.monotonic() < deadline, f"{name}: still {'not ' if connected else ''}there"
        time.sleep(0.05)


def wait_renewed(r: redis.Redis | RedisCluster, lock: bytes) -> None:
    """Until the live worker has renewed `lock` at least 0.7 s after now: the next scan then finds
    its TTL re-armed beyond lockguard's 500 ms slack (bot.core.tenures.REARM_SLACK_MS)."""
    time.sleep(0.7)
    before = r.pttl(lock)
    deadline = time.monotonic() + 15
    while r.pttl(lock) <= before:
        assert time.monotonic() < deadline, "the live worker did not renew its lock"
        time.sleep(0.05)


def backlog_in_redis(r: redis.Redis, q: bytes) -> int:
    return int(r.llen(q + b":wait") + r.llen(q + b":paused") + r.zcard(q + b":prioritized"))


def two_scans(
    r: redis.Redis | RedisCluster,
    bullmq: BullMQ,
    live_lock: str,
    backdated: Callable[[Any], None] = backdate,
    dumped: Callable[[Any], dict[bytes, Any]] = dumps,
) -> tuple[dict[str, Any], bool]:
    """Scan (leases recorded), wait for a renewal of `live_lock`, backdate, then the judged scan
    with every live worker frozen: its JSON, and whether every non-lockguard key kept its exact
    bytes."""
    code, _ = run("scan", "--json")
    assert code == 0  # locks with a TTL seen once: not judged yet
    wait_renewed(r, live_lock.encode())
    backdated(r)
    live = bullmq.running()
    for w in live:
        w.freeze()
    try:
        before = dumped(r)
        doc = scan_json()
        unchanged = dumped(r) == before
    finally:
        for w in live:
            w.thaw()
    return doc, unchanged


def unrenewed(backdated: Callable[[Any], None], lock: str) -> Callable[[Any], None]:
    """`backdated`, and the dead worker's lock left with 25 of its 60 minutes: as if 35 had
    passed unrenewed. A live worker renews at half its lockDuration (`bot.core.renewal`), so
    only then is the renewal overdue and the lock `stale_lease`."""

    def both(r: Any) -> None:
        backdated(r)
        assert r.pexpire(lock, 25 * 60_000)

    return both


def test_a_sigkilled_worker_s_lock_shows_its_backlog_and_a_live_worker_s_shows_it_alive(
    env: redis.Redis, bullmq: BullMQ
) -> None:
    """`emails`: 7 jobs (2 prioritized), its worker SIGKILLed holding one, the queue paused, a
    QueueEvents listener still connected; `reports`: a named worker renewing its job's lock."""
    bullmq.add("emails", jobs(5), jobs(2, priority=3))
    dead = bullmq.work("emails", lock_duration_ms=HOUR_MS)  # unnamed: `bull:<b64>` connection
    bullmq.add("reports", jobs(3))
    live = bullmq.work("reports", name="r1", lock_duration_ms=HOUR_MS, lock_renew_ms=1000)
    for name in ("bull:ZW1haWxz", "bull:cmVwb3J0cw==:w:r1"):  # as names.py says
        wait_connected(env, name)
    dead.kill()
    wait_connected(env, "bull:ZW1haWxz", connected=False)
    bullmq.listen("emails")  # a QueueEvents listener (a dashboard, say) is no worker
    wait_connected(env, "bull:ZW1haWxz:qe")
    dead_lock = f"bull:emails:{dead.job}:lock"
    assert env.get(dead_lock) == dead.token.encode()  # still held by the dead worker
    bullmq.pause("emails")  # someone paused it meanwhile: 5.x moves `wait` to `paused`
    waiting = backlog_in_redis(env, b"bull:emails")
    assert waiting == 6  # 7 added, 1 taken
    assert env.llen(b"bull:emails:paused") == (4 if bullmq.package == "bullmq5" else 0)

    live_lock = f"bull:reports:{live.job}:lock"
    doc, unchanged = two_scans(env, bullmq, live_lock, unrenewed(backdate, dead_lock))

    found = by_key(doc)
    gone, alive = found[dead_lock], found[live_lock]
    assert (gone["layout"], gone["reason"]) == ("bullmq", "stale_lease")  # counting down
    assert gone["renewal"].startswith("a live holder would have renewed by ")
    assert gone["impact"]["backlog"] == waiting
    assert gone["impact"]["owner_alive"] is False
    assert gone["impact"]["owner_evidence"] == "no worker connected to queue `emails`"
    assert dead.token.split(":")[0] in gone["owner"]
    assert (alive["layout"], alive["reason"]) == ("bullmq", "long_held_renewing")
    assert alive["impact"]["backlog"] == 2
    assert alive["impact"]["owner_alive"] is True
    assert alive["impact"]["owner_evidence"] == "1 worker connection for queue `reports`"
    assert [f["key"] for f in doc["findings"]] == [dead_lock, live_lock]
    assert gone["impact"]["score"] > alive["impact"]["score"]
    assert unchanged


def test_a_named_worker_under_another_prefix(
    env: redis.Redis, bullmq: BullMQ, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dead worker with a `name`, a live unnamed one, both under the prefix `{jobs}` (the
    cluster hash tag BullMQ's docs use); and a live worker of a queue of the same name under the
    default prefix, which owns none of them."""
    monkeypatch.setenv("LOCKGUARD_LOCK_PATTERNS", "{jobs}:*:lock")
    bullmq.add("emails", jobs(4), prefix=PREFIX)
    dead = bullmq.work("emails", prefix=PREFIX, name="mailer-7", lock_duration_ms=HOUR_MS)
    bullmq.add("emails", jobs(2))  # `bull:emails`: another queue to BullMQ
    bullmq.work("emails", lock_duration_ms=HOUR_MS)  # holds `bull:emails:1:lock`, not watched
    bullmq.add("reports", jobs(1), prefix=PREFIX)
    live = bullmq.work("reports", prefix=PREFIX, lock_duration_ms=HOUR_MS, lock_renew_ms=1000)
    for name in ("{jobs}:ZW1haWxz:w:mailer-7", "bull:ZW1haWxz", "{jobs}:cmVwb3J0cw=="):
        wait_connected(env, name)
    dead.kill()
    wait_connected(env, "{jobs}:ZW1haWxz:w:mailer-7", connected=False)
    dead_lock, live_lock = f"{{jobs}}:emails:{dead.job}:lock", f"{{jobs}}:reports:{live.job}:lock"

    doc, unchanged = two_scans(env, bullmq, live_lock)

    found = by_key(doc)
    assert set(found) == {dead_lock, live_lock}
    gone, alive = found[dead_lock]["impact"], found[live_lock]["impact"]
    assert gone["backlog"] == 3
    assert gone["owner_alive"] is False
    assert gone["owner_evidence"] == "no worker connected to queue `emails`"
    assert alive["backlog"] == 0
    assert alive["owner_alive"] is True
    assert alive["owner_evidence"] == "1 worker connection for queue `reports`"
    assert [f["key"] for f in doc["findings"]] == [dead_lock, live_lock]
    assert unchanged


def test_a_job_scheduler_s_job_lock_names_its_queue(env: redis.Redis, bullmq: BullMQ) -> None:
    """A job scheduler's jobs have ids `repeat:<scheduler id>:<millis>`, and a scheduler id may
    hold `:`: the lock `bull:reports:repeat:user:42:digest:<millis>:lock` is queue `reports`'s
    (read as the last parts before, lockguard saw queue `digest`: backlog 0, owner gone), and
    its owner names that whole job id (it once said `job <millis>`)."""
    job = bullmq.schedule("reports", "user:42:digest")
    assert job.startswith("repeat:user:42:digest:")
    live = bullmq.work("reports", lock_duration_ms=HOUR_MS, lock_renew_ms=1000)
    assert live.job == job
    bullmq.add("reports", jobs(2))
    lock = f"bull:reports:{job}:lock"
    assert env.get(lock) == live.token.encode()

    doc, unchanged = two_scans(env, bullmq, lock)

    found = by_key(doc)[lock]
    assert found["reason"] == "long_held_renewing"
    assert found["owner"] == f"worker {live.token.split(':')[0]} job {job}"  # the whole job id
    assert found["impact"]["backlog"] == 2
    assert found["impact"]["owner_alive"] is True
    assert found["impact"]["owner_evidence"] == "1 worker connection for queue `reports`"
    assert unchanged


def backdate_cluster(rc: RedisCluster) -> None:
    """tests/test_acl.py `backdate` on a cluster: every per-primary tenure table of the plan."""
    plan = tenure_plan.load(rc, scans.current_gen(rc))
    assert plan is not None, "the first scan recorded no lease plan"
    for table in plan.names():
        for key, record in rc.hgetall(table).items():
            lease = tenures.decode(record)
            assert lease is not None
            older = replace(lease, first_seen_ms=lease.first_seen_ms - TWO_HOURS_MS)
            rc.hset(table, key, tenures.encode(older))


def test_on_a_cluster_a_worker_connected_to_any_primary_counts(
    cluster: EmbeddedCluster,
    rc: RedisCluster,
    bullmq_cluster: BullMQ,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """BullMQ on a 3-primary cluster through an ioredis Cluster connection (a hash-tag prefix,
    so each queue's keys share a slot): its workers' named connections are on whichever primaries
    ioredis opened, and lockguard reads every primary's CLIENT LIST."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REDIS_CLUSTER", "true")
    monkeypatch.setenv("REDIS_URL", cluster.url)
    monkeypatch.setenv("LOCKGUARD_LOCK_PATTERNS", "{jobs}:*:lock")
    bq = bullmq_cluster
    bq.add("emails", jobs(4), prefix=PREFIX)
    dead = bq.work("emails", prefix=PREFIX, lock_duration_ms=HOUR_MS)
    bq.add("reports", jobs(3), prefix=PREFIX)
    live = bq.work(
        "reports", prefix=PREFIX, name="r1", lock_duration_ms=HOUR_MS, lock_renew_ms=1000
    )
    for name in ("{jobs}:ZW1haWxz", "{jobs}:cmVwb3J0cw==:w:r1"):  # on one primary or more
        wait_connected(rc, name)
    dead.kill()
    wait_connected(rc, "{jobs}:ZW1haWxz", connected=False)
    dead_lock, live_lock = f"{{jobs}}:emails:{dead.job}:lock", f"{{jobs}}:reports:{live.job}:lock"

    doc, unchanged = two_scans(
        rc, bq, live_lock, unrenewed(backdate_cluster, dead_lock), cluster_dumps
    )

    found = by_key(doc)
    gone, alive = found[dead_lock], found[live_lock]
    assert (gone["reason"], alive["reason"]) == ("stale_lease", "long_held_renewing")
    assert gone["impact"]["backlog"] == 3
    assert gone["impact"]["owner_alive"] is False
    assert gone["impact"]["owner_evidence"] == "no worker connected to queue `emails`"
    assert alive["impact"]["backlog"] == 2
    assert alive["impact"]["owner_alive"] is True
    # one worker, a named connection on each primary ioredis opened (BullMQ's own getWorkers
    # counts the primary with the most): the sentence counts connections, one or more
    said = alive["impact"]["owner_evidence"]
    assert re.fullmatch(r"[1-9]\d* worker connections? for queue `reports`", said), said
    assert [f["key"] for f in doc["findings"]] == [dead_lock, live_lock]
    assert unchanged


@pytest.mark.parametrize("prefix", ["bull", PREFIX, "app:jobs"])  # the last one holds `:`
@pytest.mark.parametrize("loose", ["false", "true"], ids=["strict", "loose"])
def test_under_a_pattern_for_the_whole_queue_only_job_locks_are_locks(
    env: redis.Redis, bullmq: BullMQ, monkeypatch: pytest.MonkeyPatch, prefix: str, loose: str
) -> None:
    """`<prefix>:*` over a queue with most of what BullMQ keeps (deduplication keys with and
    without a TTL, delayed and prioritized jobs, a job scheduler, a rate limiter, the stalled
    check): the one finding is the dead worker's job lock, every other key is shown as no lock,
    the deduplication keys (a job id, one with a TTL: a counter lock's shape) as BullMQ's; with
    loose recognition too (which takes other hashes, such as a job's, for locks)."""
    monkeypatch.setenv("LOCKGUARD_LOCK_PATTERNS", f"{prefix}:*")
    monkeypatch.setenv("LOCKGUARD_LOOSE_RECOGNITION", loose)
    bullmq.add(
        "emails",
        jobs(2),
        jobs(1, deduplication={"id": "welcome:ann", "ttl": HOUR_MS}),
        jobs(1, deduplication={"id": "digest:42"}),
        jobs(1, delay=HOUR_MS),
        jobs(1, priority=1),
        prefix=prefix,
    )
    bullmq.schedule("emails", "user:42", prefix=prefix)
    # its stalled check's key lives as long as its interval: an hour, so it outlasts the test
    dead = bullmq.work(
        "emails",
        prefix=prefix,
        lock_duration_ms=HOUR_MS,
        rate_limit=True,
        stalled_interval_ms=HOUR_MS,
    )
    wait_connected(env, f"{prefix}:ZW1haWxz")
    dead.kill()
    wait_connected(env, f"{prefix}:ZW1haWxz", connected=False)
    q, lock = f"{prefix}:emails:", f"{prefix}:emails:{dead.job}:lock"
    for suffix in ("de:welcome:ann", "de:digest:42", "limiter", "stalled-check", "repeat:user:42"):
        assert env.exists(q + suffix), suffix
    assert env.pttl(q + "stalled-check") > 60_000

    code, _ = run("scan", "--json")
    assert code == 0
    backdate(env)
    before = dumps(env)
    doc = scan_json()
    assert dumps(env) == before

    assert [f["key"] for f in doc["findings"]] == [lock]
    assert {f["key"].encode() for f in doc["not_a_lock_keys"]} == set(before) - {lock.encode()}
    notes = {f["key"]: f["note"] for f in doc["not_a_lock_keys"]}
    for dedup in ("de:welcome:ann", "de:digest:42"):
        assert "BullMQ's own bookkeeping" in notes[q + dedup], notes[q + dedup]
        assert "deduplication key" in notes[q + dedup]
