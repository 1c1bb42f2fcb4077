"""lockguard on a real Redis Cluster (3 primaries on loopback): scan every primary, keep lease
history in each lock's own slot, release per key with one cluster-wide event each, and never
touch a live lock."""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

from bot.cases.reclaim_config import ReclaimConfig
from bot.core.errors import CaseDecidedError, RedisUnavailableError
from bot.core.model import Reason
from bot.core.pacing import DEFAULT_BUDGET, UNPACED
from bot.core.rules import Policy
from bot.demo.planted import NOT_DUE_KEYS
from bot.demo.walkthrough import COUNTER_KEY, LIVE_KEY, PATTERNS, Background, plant
from bot.engine import Engine
from bot.scan.result import ScanOptions
from bot.store import scans, slots, tenure_plan
from bot.store.scans import server_ms
from tests.cluster_fixtures import start_cluster
from tests.embedded_cluster import EmbeddedCluster

POLICY = Policy(stale_threshold_ms=1_000)
CHANNEL = "locks:reclaimed"
_MARKERS = itertools.count(1)


def engine(client: redis.Redis, **cfg: object) -> Engine:
    options = ScanOptions(patterns=list(PATTERNS), policy=POLICY)
    config = ReclaimConfig(dry_run=False, release_channel=CHANNEL, policy=POLICY, **cfg)  # type: ignore[arg-type]
    return Engine(client, options, config, endpoint="cluster")


class Subscribers:
    """One plain subscriber on every primary: each must see every event (PUBLISH is
    cluster-wide)."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.nodes = [n.client() for n in cluster.primaries()]
        self.subs = []
        for node in self.nodes:
            ps = node.pubsub(ignore_subscribe_messages=True)
            ps.subscribe(CHANNEL)
            self.subs.append(ps)
        assert all(got == [] for got in self.rest())  # and every subscription is in place

    def events(self, want: int, timeout: float = 10.0) -> list[list[dict[str, object]]]:
        """Each subscriber's events: `want` of them waited for, then any more published before
        now (`rest`)."""
        got: list[list[dict[str, object]]] = [[] for _ in self.subs]
        deadline = time.monotonic() + timeout
        while any(len(g) < want for g in got):
            assert time.monotonic() < deadline, f"not {want} events on every primary: {got}"
            for ps, g in zip(self.subs, got, strict=True):
                msg = ps.get_message(timeout=0.02)
                if msg:
                    g.append(json.loads(msg["data"]))
        for g, more in zip(got, self.rest(), strict=True):
            g.extend(more)
        return got

    def rest(self, timeout: float = 30.0) -> list[list[dict[str, object]]]:
        """Each subscriber's events published before now and not read yet, and none after (a
        positive signal, not a wait): a marker is published now on every primary, and each
        subscriber reads until it has every primary's marker. An event is published by the
        primary of its lock; that primary sends its PUBLISHes over the cluster bus to each other
        node on one link, in order, and a subscriber gets one channel's messages in the order its
        node handled them, so a primary's marker comes after every event that primary
        published before it (the idea of `Listener.rest()` in tests/cases/test_reclaim.py)."""
        round_ = next(_MARKERS)  # JSON: the demo's `Background` also reads the channel
        mine = [
            json.dumps({"test_marker": f"{round_}-{i}"}).encode() for i in range(len(self.nodes))
        ]
        for node, marker in zip(self.nodes, mine, strict=True):
            node.publish(CHANNEL, marker)
        markers = set(mine)
        got: list[list[dict[str, object]]] = [[] for _ in self.subs]
        seen: list[set[bytes]] = [set() for _ in self.subs]
        deadline = time.monotonic() + timeout
        while any(s != markers for s in seen):
            assert time.monotonic() < deadline, f"a marker never came back: {seen}, {got}"
            for ps, g, s in zip(self.subs, got, seen, strict=True):
                if s == markers:
                    continue
                msg = ps.get_message(timeout=0.02)
                if msg and msg["data"] in markers:
                    s.add(msg["data"])
                elif msg:
                    g.append(json.loads(msg["data"]))
        return got


def test_abandoned_locks_of_every_layout_are_released_on_a_cluster_one_event_each(
    cluster: EmbeddedCluster, rc: RedisCluster
) -> None:
    planted = plant(rc, server_ms(rc) / 1000)
    owners = {cluster.owner(k).port for k, _ in planted}
    assert len(owners) > 1, "the planted locks should spread over several primaries"
    subs = Subscribers(cluster)
    bg = Background(rc)
    bg.start()
    try:
        eng = engine(rc)
        first, _ = eng.scan(propose=False)
        assert first.mode == "lua"
        assert first.scanned == len(planted)
        time.sleep(1.2)
        result, case = eng.scan()
        assert case is not None
        offered = {k for k, _ in planted} - {LIVE_KEY, *NOT_DUE_KEYS}
        assert {lk.key for lk in case.locks} == offered
        assert result.by_reason[Reason.LONG_HELD_RENEWING] == 1 + len(NOT_DUE_KEYS)
        report = eng.approve(case.id, "U123")
        outcomes = {o.lock.key: o.outcome for o in report.outcomes}
        assert set(outcomes.values()) == {"released"}, outcomes
        every = subs.events(len(outcomes))
        for got in every:  # each primary's subscriber saw each event once
            assert sorted(str(e["key_hex"]) for e in got) == sorted(k.hex() for k in outcomes)
        assert rc.get(LIVE_KEY) is not None  # the live, renewing lock is untouched
        assert rc.exists(*NOT_DUE_KEYS) == len(NOT_DUE_KEYS)  # their renewal is not overdue
        assert not rc.exists(COUNTER_KEY) or rc.get(COUNTER_KEY) == b"1"  # a contender since
        with pytest.raises(CaseDecidedError):  # nothing twice
            eng.approve(case.id, "U123")
        assert all(got == [] for got in subs.rest())
    finally:
        bg.close()


def test_lease_history_is_kept_on_the_locks_primary_and_survives_resharding(
    cluster: EmbeddedCluster, rc: RedisCluster
) -> None:
    """Each primary's share of the tenure history is one table on that primary (the plan of
    the scan names it); after the lock's slot moves to another primary, the next scan still
    finds its previous record (in the old table, read through the cluster) and carries it on
    into the new primary's table."""
    key = b"lock:billing:settle"
    rc.set(key, b"tok-1")
    eng = engine(rc)
    eng.scan(propose=False)
    slot = slots.slot_of(key)
    src = cluster.owner(key)
    plan = tenure_plan.load(rc, scans.current_gen(rc))
    assert plan is not None
    assert len(plan.tables) == 3
    with src.client() as c:
        assert c.hexists(plan.table_of(slot), key)
        assert c.execute_command("CLUSTER", "KEYSLOT", plan.table_of(slot)) in {
            s for s in range(slots.SLOTS) if plan.owners[s] == plan.owners[slot]
        }
    dst = next(n for n in cluster.primaries() if n is not src)
    cluster.move_slot(slot, dst)
    time.sleep(1.1)
    result, case = eng.scan()
    assert cluster.owner(key) is dst
    assert case is not None
    assert [lk.key for lk in case.locks] == [key]
    worst = next(f for f in result.worst if f.key == key)
    assert worst.observations == 2
    assert worst.held_seconds >= 1.0
    assert result.scanned == 1
    assert result.stats.duplicates == 0
    plan = tenure_plan.load(rc, scans.current_gen(rc))
    assert plan is not None
    with dst.client() as c:
        assert c.hexists(plan.table_of(slot), key)  # now on the lock's new primary
    result, _ = eng.scan(propose=False)
    assert next(f for f in result.worst if f.key == key).observations == 3
    gen = scans.current_gen(rc)
    leftovers = {
        k
        for n in cluster.primaries()
        for k in n.client().scan_iter(match=b"{lockguard*}:leases:*")
        if k != b"{lockguard}:leases:gen"
    }
    # the older generations' tables and plans were dropped (a table with no lock is no key)
    assert leftovers == {
        tenure_plan.load(rc, gen).table_of(slot),  # type: ignore[union-attr]
        b"{lockguard}:leases:%d:plan" % gen,
    }


def test_many_locks_over_every_primary_are_each_counted_once(rc: RedisCluster) -> None:
    with rc.pipeline(transaction=False) as pipe:
        for i in range(6000):
            pipe.set(f"lock:job:{i}", f"t{i}")
            pipe.set(f"cache:{i}", "x")
        pipe.execute()
    eng = engine(rc)
    for _ in range(2):
        result, _ = eng.scan(propose=False)
        assert result.scanned == 6000
        assert result.by_reason[Reason.INFINITE_TTL] == 6000
    assert result.stats.duplicates == 0


def test_unpaced_each_primary_writes_its_tenure_records_a_thousand_at_a_time(
    rc: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Budget off: a node's records are written a thousand at a time; paced, or read by
    pipeline (which skips repeats by the table), each batch's before the node's next."""
    from bot.scan import ReadMode, cluster_scanner

    writes: list[tuple[bytes, int]] = []  # (table, records) per round trip
    write_table = scans.write_table

    def counted(client: redis.Redis, table: bytes, records: dict[bytes, bytes]) -> None:
        writes.append((table, len(records)))
        write_table(client, table, records)

    monkeypatch.setattr(cluster_scanner.scans, "write_table", counted)
    with rc.pipeline(transaction=False) as pipe:
        for i in range(4000):
            pipe.set(f"lock:w:{i}", f"t{i}")
        pipe.execute()
    eng = engine(rc)
    eng.options = dataclasses.replace(eng.options, budget=UNPACED)
    eng.scan(propose=False)
    per_table: dict[bytes, list[int]] = {}
    for table, n in writes:
        per_table.setdefault(table, []).append(n)
    assert len(per_table) == 3  # one table per primary
    for sizes in per_table.values():  # about 1,333 records each: one full write, then the rest
        assert len(sizes) == 2
        assert sizes[0] >= cluster_scanner.WRITE_EVERY
    result, _ = eng.scan(propose=False, keep=5000)
    assert result.scanned == 4000
    assert {f.observations for f in result.worst} == {2}  # every record landed
    writes.clear()
    eng.scan(mode=ReadMode.PIPELINE, propose=False)  # it skips repeats by the table: per batch
    assert len(writes) > 3 * 2
    assert max(n for _, n in writes) < cluster_scanner.WRITE_EVERY
    writes.clear()
    eng.options = dataclasses.replace(eng.options, budget=DEFAULT_BUDGET)
    result, _ = eng.scan(propose=False, keep=5000)  # paced: each batch's, in Lua mode too
    assert result.mode == "lua"
    assert len(writes) > 3 * 2
    assert max(n for _, n in writes) < cluster_scanner.WRITE_EVERY
    assert {f.observations for f in result.worst} == {4}


def test_pipelined_reads_on_a_cluster_match_the_lua_reads(rc: RedisCluster) -> None:
    from bot.scan import ReadMode

    for i in range(300):
        rc.set(f"lock:p:{i}", f"t{i}")
    rc.hset(b"redisson:a", b"6f1c2c1e-6f3a-4a5b-9c1d-2b3c4d5e6f70:1", b"1")
    eng = engine(rc)
    a, _ = eng.scan(mode=ReadMode.PIPELINE, propose=False)
    b, _ = eng.scan(mode=ReadMode.LUA, propose=False, keep=1000)
    assert (a.mode, b.mode) == ("pipeline", "lua")
    assert a.scanned == b.scanned == 301
    assert dict(a.by_layout) == dict(b.by_layout)
    found = {f.key: f.observations for f in b.worst}
    assert found[b"redisson:a"] == 2  # the pipelined scan's leases carried on


def test_a_primary_killed_mid_scan_stops_the_scan_naming_it_and_the_next_one_completes() -> None:
    c = start_cluster(3, 1)
    try:
        client = c.client()
        with client.pipeline(transaction=False) as pipe:
            for i in range(60_000):
                pipe.set(f"lock:k:{i}", "t")
            pipe.execute()
        eng = engine(client)
        eng.scan(propose=False)
        c.sync_replicas()  # the replicas hold every lock and lease when the primary dies
        victim = c.primaries()[1]
        killed = threading.Event()

        def kill(_finding: object) -> None:
            if not killed.is_set():
                killed.set()
                victim.proc.kill()

        with pytest.raises(RedisUnavailableError) as err:
            eng.scan(on_finding=kill, propose=False)
        assert f"cluster node 127.0.0.1:{victim.port}" in str(err.value)
        assert "the next scan starts again" in str(err.value)
        victim.proc.wait()
        deadline = time.monotonic() + 30
        while len(c.primaries()) < 3:  # until its replica has taken over
            assert time.monotonic() < deadline, "no failover"
            time.sleep(0.1)
        c.wait_ok(30)
        result, _ = eng.scan(propose=False)
        assert result.scanned == 60_000
        assert all(f.observations >= 2 for f in result.worst)  # no lease was lost
    finally:
        c.stop()


def test_a_failover_between_approval_and_release_never_deletes_a_lock_that_changed_hands() -> None:
    c = start_cluster(3, 1)
    try:
        client = c.client()
        keys = [f"lock:fo:{i}".encode() for i in range(40)]
        for k in keys:
            client.set(k, b"old-" + k)
        eng = engine(client)
        eng.scan(propose=False)
        time.sleep(1.1)
        _, case = eng.scan()
        assert case is not None
        assert len(case.locks) == len(keys)
        moved = keys[0]
        new_primary = c.failover(c.owner(moved))
        client.set(moved, b"new-holder")  # re-acquired on the new primary
        report = eng.approve(case.id, "U1")
        outcomes = {o.lock.key: o.outcome for o in report.outcomes}
        assert outcomes[moved] == "skipped_reacquired"
        assert client.get(moved) == b"new-holder"
        assert {v for k, v in outcomes.items() if k != moved} == {"released"}
        assert c.owner(moved) is new_primary
        assert not any(client.exists(k) for k in keys[1:])
    finally:
        c.stop()


def test_the_cli_on_a_cluster_scans_approves_and_exits_3_naming_a_dead_node(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.test_cli_cases import plant_abandoned, run

    c = start_cluster(3)
    try:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("REDIS_CLUSTER", "true")
        monkeypatch.setenv("REDIS_URL", c.url)
        monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
        client = c.client()
        keys = [f"lock:cli:{i}".encode() for i in range(30)]
        for k in keys:
            plant_abandoned(client, k)
        code, out = run("scan", "--json")  # past the threshold on first sight
        assert code == 1, out
        case_id = json.loads(out)["case"]["case_id"]
        code, out = run("approve", case_id, "--by", "ann")
        assert code == 0, out + capsys.readouterr().err
        assert not any(client.exists(k) for k in keys)
        victim = c.primaries()[2]
        victim.proc.kill()
        victim.proc.wait()
        code, _ = run("scan")
        err = capsys.readouterr().err
        assert code == 3
        assert f"127.0.0.1:{victim.port}" in err
    finally:
        c.stop()


def test_a_release_cut_short_before_the_case_heard_of_it_is_finished_from_the_receipts(
    cluster: EmbeddedCluster, rc: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a cluster the release script records into a receipt in the lock's slot; a run that
    dies before copying it into the case is finished by resume: `released`, not
    `already_gone`, and no event twice."""
    from bot.cases.case_store import CaseStore
    from tests.test_cli_cases import plant_abandoned

    keys = [f"lock:cut:{i}".encode() for i in range(12)]
    for k in keys:
        plant_abandoned(rc, k)
    subs = Subscribers(cluster)
    eng = engine(rc)
    _, case = eng.scan()
    assert case is not None

    def lost(*_a: object, **_k: object) -> None:
        raise redis.ConnectionError("the approver's connection died here")

    with monkeypatch.context() as m:
        m.setattr(CaseStore, "record", lost)
        with pytest.raises(RedisUnavailableError):  # the approval stops: exit 3
            eng.approve(case.id, "U1")
    assert not any(rc.exists(k) for k in keys)  # deleted, but the case has no outcome yet
    assert eng.case(case.id).outcomes == [] or all(
        o["outcome"] != "released" for o in eng.case(case.id).outcomes
    )
    first = subs.events(len(keys))
    report = eng.approve(case.id, "U1", resume=True)
    assert {o.outcome for o in report.outcomes} == {"released"}
    assert {str(o["outcome"]) for o in eng.case(case.id).outcomes} == {"released"}
    assert all(len(got) == len(keys) for got in first)  # one event per lock, none on resume
    assert all(got == [] for got in subs.rest())


def test_keys_that_are_not_locks_are_never_cased_or_touched_on_a_cluster(rc: RedisCluster) -> None:
    """The same defects as on one server (`tests/cases/test_never_delete.py`), spread over the
    primaries: bookkeeping hashes, counters, flags, big values, lists ... under `lock:*`."""
    from tests.cases.test_never_delete import plant_not_locks
    from tests.cases.test_reclaim import dump

    plant_not_locks(rc)
    before = dump(rc)
    eng = engine(rc)
    for i in range(3):
        if i:
            time.sleep(1.1)
        _, case = eng.scan(keep=10_000)
        assert case is None
    assert dump(rc) == before


def test_each_slots_tag_lands_in_that_slot_with_no_brace(rc: RedisCluster) -> None:
    """`bot.store.slots.tags`: every slot has a tag whose `{lockguard:<tag>}` hashes to it (checked
    with redis-py's and the server's own CRC16), and no tag holds a brace."""
    from redis.crc import key_slot

    node = slots.primaries(rc)[0][1]
    for s, tag in enumerate(slots.tags()):
        assert b"{" not in tag
        assert b"}" not in tag
        assert key_slot(slots.tenure_table(7, s)) == s
    for s in (0, 1, 5460, 5461, 12345, 16383):
        assert node.execute_command("CLUSTER", "KEYSLOT", slots.tenure_table(7, s)) == s
