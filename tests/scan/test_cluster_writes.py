"""A Redis Cluster scan writes each primary's lease records a few HSETs at a time, not one round
trip per batch (real servers): every lock is still counted once, the history carries on, and a
slot moved mid-scan while records are kept unwritten still counts each lock once."""

from __future__ import annotations

import pytest
import redis
from redis.cluster import RedisCluster

from bot.core.errors import LockguardError
from bot.core.model import Reason
from bot.demo.embedded_cluster import EmbeddedCluster
from bot.scan import cluster as cluster_scanner
from bot.store import scans
from tests.scan import test_cluster_resharding as resharding
from tests.scan.test_cluster import engine

LOCKS = 3000


def hset_calls(cluster: EmbeddedCluster) -> dict[int, int]:
    out = {}
    for n in cluster.primaries():
        with n.client() as c:
            out[n.port] = int(c.info("commandstats").get("cmdstat_hset", {}).get("calls", 0))
    return out


def locks_per_primary(cluster: EmbeddedCluster) -> dict[int, int]:
    out = {}
    for n in cluster.primaries():
        with n.client() as c:
            out[n.port] = sum(1 for _ in c.scan_iter(match=b"lock:*", count=1000))
    return out


def test_lease_records_are_written_a_few_hsets_per_primary_not_one_per_batch(
    cluster: EmbeddedCluster, rc: RedisCluster
) -> None:
    with rc.pipeline(transaction=False) as pipe:
        for i in range(LOCKS):
            pipe.set(f"lock:job:{i}", f"t{i}")
            pipe.set(f"cache:{i}", "x")
        pipe.execute()
    per_primary = locks_per_primary(cluster)
    eng = engine(rc)
    for observations in (1, 2):
        before = hset_calls(cluster)
        result, _ = eng.scan(propose=False, keep=LOCKS)
        after = hset_calls(cluster)
        assert result.scanned == LOCKS
        assert result.by_reason[Reason.INFINITE_TTL] == LOCKS
        assert result.stats.duplicates == 0
        assert {f.observations for f in result.worst} == {observations}  # history carried on
        for port, locks in per_primary.items():
            # in HSETs of WRITE_CHUNK, WRITE_EVERY records a round trip, one more at the pass
            # end, and the plan's HSET on one primary: not one per batch (a batch of a few
            # dozen keys: a hundred or more here)
            most = locks // scans.WRITE_CHUNK + locks // cluster_scanner.WRITE_EVERY + 3
            assert after[port] - before[port] <= most


def test_records_kept_until_the_pass_ends_are_all_in_the_table_for_the_next_scan(
    cluster: EmbeddedCluster, rc: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster_scanner, "WRITE_EVERY", 10**9)  # written at each pass end only
    for i in range(LOCKS):
        rc.set(f"lock:job:{i}", f"t{i}")
    eng = engine(rc)
    eng.scan(propose=False)
    result, _ = eng.scan(propose=False, keep=LOCKS)
    assert result.scanned == LOCKS
    assert {f.observations for f in result.worst} == {2}


def test_a_slot_moved_mid_scan_while_records_are_kept_counts_each_lock_once(
    cluster: EmbeddedCluster, rc: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing written before a pass ends, unless a batch with keys of a moved slot comes: its
    # arrived keys are looked up in the tables this scan writes, so every node's kept records
    # are written first.
    monkeypatch.setattr(cluster_scanner, "WRITE_EVERY", 10**9)
    resharding.test_a_slot_moved_mid_scan_is_scanned_again_on_its_new_primary(cluster, rc)


def test_keys_arriving_during_a_move_while_records_are_kept_are_read_once(
    cluster: EmbeddedCluster, rc: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster_scanner, "WRITE_EVERY", 10**9)
    resharding.test_keys_a_node_cannot_serve_yet_are_read_once_the_move_ends(
        cluster, rc, resharding.ReadMode.LUA
    )


def test_a_refused_write_of_kept_records_stops_the_scan_naming_the_node(
    cluster: EmbeddedCluster, rc: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(300):
        rc.set(f"lock:job:{i}", f"t{i}")
    eng = engine(rc)
    eng.scan(propose=False)
    real = scans.write_table

    def refused(client: redis.Redis, table: bytes, records: dict[bytes, bytes]) -> None:
        raise redis.ResponseError("OOM command not allowed when used memory > 'maxmemory'")

    monkeypatch.setattr(scans, "write_table", refused)
    with pytest.raises(LockguardError) as err:
        eng.scan(propose=False)
    assert "cluster node 127.0.0.1:" in str(err.value)
    assert "nothing was recorded" in str(err.value)
    monkeypatch.setattr(scans, "write_table", real)
    result, _ = eng.scan(propose=False, keep=300)
    assert {f.observations for f in result.worst} == {2}  # the stopped scan recorded nothing
