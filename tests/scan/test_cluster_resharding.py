"""A Redis Cluster resharded while lockguard scans it (real servers): every lock is still counted
once, no tenure history is lost, and at worst one node is scanned again; a move that does not end
stops the scan (exit 3) and the next scan completes."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter

import pytest
from redis.cluster import RedisCluster

from bot.core.errors import ScanInterruptedError
from bot.core.model import Finding
from bot.core.pacing import UNPACED
from bot.scan import ReadMode
from bot.scan import cluster_scanner as cluster_scanner
from bot.store import slots
from tests.cluster_fixtures import start_cluster
from tests.embedded_cluster import EmbeddedCluster
from tests.scan.test_cluster import engine

SLOT_KEYS = 600  # locks in the slot that moves (one hash tag)
SPREAD_KEYS = 2400  # locks all over the cluster


def plant(client: RedisCluster) -> None:
    with client.pipeline(transaction=False) as pipe:
        for i in range(SLOT_KEYS):
            pipe.set(f"lock:{{moving}}:{i}", f"t{i}")
        for i in range(SPREAD_KEYS):
            pipe.set(f"lock:spread:{i}", f"t{i}")
        pipe.execute()


SLOT = slots.slot_of(b"lock:{moving}:0")


def _ids(c: EmbeddedCluster, a: object, b: object) -> tuple[bytes, bytes]:
    with a.client() as x, b.client() as y:  # type: ignore[attr-defined]
        return x.execute_command("CLUSTER", "MYID"), y.execute_command("CLUSTER", "MYID")


def start_move(c: EmbeddedCluster, share: float) -> tuple[object, object]:
    """Begin resharding SLOT to another primary and migrate `share` of its keys; returns (src,
    dst). The slot is then MIGRATING on src and IMPORTING on dst until `end_move`."""
    src = c.owner(b"lock:{moving}:0")
    dst = next(n for n in c.primaries() if n is not src)
    src_id, dst_id = _ids(c, src, dst)
    with src.client() as a, dst.client() as b:
        b.execute_command("CLUSTER", "SETSLOT", SLOT, "IMPORTING", src_id)
        a.execute_command("CLUSTER", "SETSLOT", SLOT, "MIGRATING", dst_id)
        keys = a.execute_command("CLUSTER", "GETKEYSINSLOT", SLOT, SLOT_KEYS)
        some = keys[: int(len(keys) * share)]
        if some:
            a.execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", *some)
    return src, dst


def end_move(c: EmbeddedCluster, src: object, dst: object) -> None:
    _, dst_id = _ids(c, src, dst)
    with src.client() as a:  # type: ignore[attr-defined]
        while keys := a.execute_command("CLUSTER", "GETKEYSINSLOT", SLOT, 100):
            a.execute_command(
                "MIGRATE",
                "127.0.0.1",
                dst.port,
                "",
                0,
                5000,  # type: ignore[attr-defined]
                "KEYS",
                *keys,
            )
    for n in c.primaries():
        with n.client() as x:
            x.execute_command("CLUSTER", "SETSLOT", SLOT, "NODE", dst_id)
    c.wait_ok()


def scan_counting(eng: object, hook: object = None) -> tuple[object, Counter[bytes]]:
    seen: Counter[bytes] = Counter()

    def on_finding(f: Finding) -> None:
        seen[f.key] += 1
        if hook is not None:
            hook()  # type: ignore[operator]

    result, _ = eng.scan(on_finding=on_finding, propose=False, keep=0)  # type: ignore[attr-defined]
    return result, seen


def assert_history_kept(eng: object, observations: int) -> None:
    result, _ = eng.scan(propose=False, keep=10_000)  # type: ignore[attr-defined]
    assert result.scanned == SLOT_KEYS + SPREAD_KEYS
    assert {f.observations for f in result.worst} == {observations}


def test_a_slot_moved_mid_scan_is_scanned_again_on_its_new_primary(
    cluster: EmbeddedCluster, rc: RedisCluster
) -> None:
    plant(rc)
    eng = engine(rc)
    eng.options = dataclasses.replace(eng.options, budget=UNPACED)
    eng.scan(propose=False)
    dst = next(n for n in cluster.primaries() if n is not cluster.owner(b"lock:{moving}:0"))
    moved = threading.Event()

    def move() -> None:
        if not moved.is_set():
            moved.set()
            cluster.move_slot(SLOT, dst)

    result, seen = scan_counting(eng, move)
    assert cluster.owner(b"lock:{moving}:0") is dst
    assert result.scanned == SLOT_KEYS + SPREAD_KEYS  # type: ignore[attr-defined]
    assert len(seen) == SLOT_KEYS + SPREAD_KEYS
    assert max(seen.values()) == 1  # each lock reported once
    assert_history_kept(eng, 3)  # both scans' history carried on: nothing lost


@pytest.mark.parametrize("mode", [ReadMode.LUA, ReadMode.PIPELINE])
def test_keys_a_node_cannot_serve_yet_are_read_once_the_move_ends(
    cluster: EmbeddedCluster, rc: RedisCluster, mode: ReadMode
) -> None:
    plant(rc)
    eng = engine(rc)
    eng.options = dataclasses.replace(eng.options, mode=mode)
    eng.scan(propose=False)
    src, dst = start_move(cluster, 0.5)  # half the slot's keys wait on dst, IMPORTING
    ended = threading.Event()

    def end_soon() -> None:
        if not ended.is_set():
            ended.set()
            threading.Timer(0.3, end_move, (cluster, src, dst)).start()

    result, seen = scan_counting(eng, end_soon)
    assert result.stats.moving > 0  # type: ignore[attr-defined]
    assert len(seen) == SLOT_KEYS + SPREAD_KEYS
    assert max(seen.values()) == 1
    assert_history_kept(eng, 3)


def test_a_move_that_does_not_end_stops_the_scan_and_the_next_one_completes(
    cluster: EmbeddedCluster, rc: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster_scanner, "PASS_WAIT_S", 0.05)
    plant(rc)
    eng = engine(rc)
    eng.scan(propose=False)
    src, dst = start_move(cluster, 0.5)
    started = time.monotonic()
    with pytest.raises(ScanInterruptedError) as err:
        eng.scan(propose=False)
    assert time.monotonic() - started < 10
    assert f"slots kept moving to cluster node 127.0.0.1:{dst.port}" in str(err.value)  # type: ignore[attr-defined]
    assert "nothing was recorded" in str(err.value)
    assert err.value.exit_code == 3
    end_move(cluster, src, dst)
    assert_history_kept(eng, 2)  # the stopped scan recorded nothing; the first one's is kept


def test_a_primary_added_empty_then_given_a_slot_is_scanned_with_the_slots_history() -> None:
    """Scaling out: a new primary with no slots yet is no reason to stop a scan; once a slot is
    resharded to it, the next scan reads that slot's locks there, with their history."""
    with start_cluster() as c:
        rc = c.client()
        plant(rc)
        eng = engine(rc)
        eng.scan(propose=False)
        new = c.add_empty_primary()
        rc.nodes_manager.initialize()
        result, _ = eng.scan(propose=False)
        assert result.scanned == SLOT_KEYS + SPREAD_KEYS
        c.move_slot(SLOT, new)
        assert_history_kept(eng, 3)  # the moved slot's 600 locks included, read on `new`
        assert c.owner(b"lock:{moving}:0") is new


def test_locks_a_primary_counted_moving_to_the_next_one_before_their_records_are_written_count_once(
    cluster: EmbeddedCluster, rc: RedisCluster
) -> None:
    """Unpaced, a primary's tenure records are written a thousand at a time; a slot resharded
    away right after its first batch lands, keys and all, on the primary scanned next, whose
    first SCAN finds them. The records the first batch left pending are written before those
    keys are looked up, so each lock is still counted once."""
    rc.nodes_manager.initialize()
    first, second = (name for name, _ in slots.primaries(rc)[:2])  # the order nodes are read in
    tag = next(t for t in (f"t{i}" for i in range(10_000)) if _name(cluster, f"{{{t}}}") == first)
    slot = slots.slot_of(f"{{{tag}}}".encode())
    with rc.pipeline(transaction=False) as pipe:
        for i in range(SLOT_KEYS):
            pipe.set(f"lock:{{{tag}}}:{i}", f"t{i}")  # no TTL: every one is a finding
        pipe.execute()
    eng = engine(rc)
    eng.options = dataclasses.replace(eng.options, budget=UNPACED)
    eng.scan(propose=False)
    dst = next(n for n in cluster.primaries() if f"127.0.0.1:{n.port}" == second)
    moved = threading.Event()

    def move() -> None:  # in the first batch's count: its records not written yet
        if not moved.is_set():
            moved.set()
            cluster.move_slot(slot, dst)

    result, seen = scan_counting(eng, move)
    assert cluster.owner(f"lock:{{{tag}}}:0".encode()) is dst
    assert len(seen) == SLOT_KEYS
    assert max(seen.values()) == 1  # none counted again on the primary it moved to
    assert result.scanned == SLOT_KEYS  # type: ignore[attr-defined]
    assert result.stats.duplicates > 0  # type: ignore[attr-defined]  # found there, skipped


def _name(cluster: EmbeddedCluster, key: str) -> str:
    return f"127.0.0.1:{cluster.owner(key.encode()).port}"
