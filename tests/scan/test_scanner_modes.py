"""The Lua batch read (SCAN inside the script, the next batch read while the caller works on the
current one) and the pipelined read: every lock once, repeats and own keys skipped, the
connection left clean, on fakeredis and on the real server (`r`)."""

from __future__ import annotations

import pytest
import redis

from bot import scan as scanner_module
from bot.core.rules import Policy
from bot.scan import ReadMode, Scanner, loop
from bot.scan.loop import run_scan
from bot.scan.pipelined import HMGET_CHUNK
from bot.scan.result import ScanOptions
from bot.store import keyspace, scans
from tests.conftest import CountPipelines, named

POLICY = Policy(stale_threshold_ms=900_000)
MODES = [ReadMode.LUA, ReadMode.PIPELINE]


def fill(client: redis.Redis, n: int, prefix: bytes = b"lock:") -> set[bytes]:
    keys = {prefix + b"%d" % i for i in range(n)}
    with client.pipeline(transaction=False) as pipe:
        for i, k in enumerate(sorted(keys)):
            if i % 5 == 0:
                pipe.hset(k, b"6f1c2c1e-6f3a-4a5b-9c1d-2b3c4d5e6f70:%d" % i, b"1")
            else:
                pipe.set(k, b"tok%d" % i, px=60_000)
        pipe.execute()
    return keys


def collect(
    scanner: Scanner,
    client: redis.Redis,
    patterns: list[bytes],
    table: bytes = keyspace.tenure_table(9001),
) -> list[list[bytes]]:
    """Run the scanner as the engine does: each batch's records written before the next."""
    batches = []
    for batch in scanner.batches(patterns, keyspace.tenure_table(9000), table):
        keys = [snap.key for snap, _ in batch]
        batches.append(keys)
        if keys:
            client.hset(table, mapping=dict.fromkeys(keys, b"r"))
    client.delete(table)
    return batches


@pytest.mark.parametrize("mode", MODES)
def test_small_batches_read_every_lock_once(r: redis.Redis, mode: ReadMode) -> None:
    keys = fill(r, 700)
    r.set(b"cache:x", b"1")
    scanner = Scanner(r, count=10, mode=mode, batch_keys=25)
    batches = collect(scanner, r, [b"lock:*"])
    seen = [k for b in batches for k in b]
    assert sorted(seen) == sorted(keys)
    assert len(batches) > 10


@pytest.mark.parametrize("mode", MODES)
def test_overlapping_patterns_in_consecutive_batches_count_once(
    r: redis.Redis, mode: ReadMode
) -> None:
    """With one batch read ahead, the first batch of the second pattern is read before the last
    batch of the first one is written: the scanner itself must skip those repeats."""
    keys = fill(r, 40)
    scanner = Scanner(r, count=1000, mode=mode)
    batches = collect(scanner, r, [b"lock:*", b"lock:*", b"lock:1*"])
    seen = [k for b in batches for k in b]
    assert sorted(seen) == sorted(keys)
    assert scanner.stats.duplicates == 40 + 11


def test_sparse_scan_replies_are_merged_into_one_batch(r: redis.Redis) -> None:
    fill(r, 5)
    with r.pipeline(transaction=False) as pipe:
        for i in range(2000):
            pipe.set(b"cache:%d" % i, b"x")
        pipe.execute()
    # Unsized (target_us=0): the script's own SCAN loop, up to the caps given.
    scanner = Scanner(
        r, count=100, mode=ReadMode.LUA, batch_keys=500, max_scan_calls=1000, target_us=0
    )
    batches = collect(scanner, r, [b"lock:*"])
    assert len(batches) == 1
    assert len(batches[0]) == 5
    assert scanner.stats.scan_calls > 10


@pytest.mark.parametrize("mode", MODES)
def test_own_keys_are_skipped(r: redis.Redis, mode: ReadMode) -> None:
    fill(r, 30)
    r.set(b"lockguard:something", b"x")  # the old format's prefix
    r.set(keyspace.PREFIX + b"something", b"x")
    scanner = Scanner(r, count=10, mode=mode)
    seen = [k for b in collect(scanner, r, [b"*"]) for k in b]
    assert len(seen) == 30
    assert not any(keyspace.is_own(k) for k in seen)
    assert scanner.stats.own_keys_skipped >= 1


def test_pipelined_reads_ask_for_tenure_records_in_short_hmgets(
    r: redis.Redis, count_pipelines: CountPipelines
) -> None:
    """A SCAN of COUNT 1000 returns hundreds of keys: their tenure records are read in HMGETs of
    at most HMGET_CHUNK fields, and every lock is still read once."""
    keys = fill(r, 700)
    sizes = count_pipelines(lambda stack: [len(a) - 2 for a in named(stack, "HMGET")])
    scanner = Scanner(r, count=1000, mode=ReadMode.PIPELINE, target_us=0)  # COUNT 1000 each
    seen = [k for b in collect(scanner, r, [b"lock:*"]) for k in b]
    assert sorted(seen) == sorted(keys)
    assert max(sizes) == HMGET_CHUNK  # a batch bigger than one HMGET
    assert sum(sizes) == 2 * len(keys)  # each key's previous record and this scan's


@pytest.mark.parametrize(
    ("pattern", "checked"),
    [
        (b"lock:*", False),  # lockguard's own keys start `{lockguard}:` or `lockguard:`
        (b"mutex:*", False),
        (b"lock:\\*", False),
        (b"*", True),
        (b"lock*", True),
        (b"l?ck:*", True),  # the literal start is all that is compared: `l`
        (b"[l]ock:*", False),  # a one-byte class is that byte: `lock:`
        (b"lockguard:*", True),
        (b"{lockguard}:leases:*", True),
        (b"{lock*", True),
    ],
)
def test_own_keys_are_checked_only_where_the_pattern_can_match_them(
    pattern: bytes, checked: bool
) -> None:
    assert scanner_module.scanner._may_match_own(pattern) is checked


def test_stopping_early_leaves_the_client_usable(r: redis.Redis) -> None:
    """A caller that stops half-way (an error in a step) leaves a reply in flight: the
    connection must not hand it to the next command."""
    fill(r, 300)
    scanner = Scanner(r, count=10, mode=ReadMode.LUA, batch_keys=10)
    batches = scanner.batches([b"lock:*"], keyspace.tenure_table(9000), keyspace.tenure_table(9002))
    next(batches)
    batches.close()
    r.set(b"after", b"1")
    assert r.get(b"after") == b"1"
    assert r.ping()


@pytest.mark.real
def test_script_cache_flushed_mid_scan_is_reloaded(real_redis: redis.Redis) -> None:
    keys = fill(real_redis, 200)
    scanner = Scanner(real_redis, count=10, mode=ReadMode.LUA, batch_keys=20)
    seen: list[bytes] = []
    table = keyspace.tenure_table(9001)
    for i, batch in enumerate(scanner.batches([b"lock:*"], keyspace.tenure_table(9000), table)):
        seen.extend(snap.key for snap, _ in batch)
        real_redis.hset(table, mapping={snap.key: b"r" for snap, _ in batch})
        if i == 1:
            real_redis.script_flush()
    assert sorted(seen) == sorted(keys)


@pytest.mark.real
def test_single_connection_client_reads_without_read_ahead(
    redis_server: object, real_redis: redis.Redis
) -> None:
    keys = fill(real_redis, 300)
    client = redis_server.client(single_connection_client=True)  # type: ignore[attr-defined]
    try:
        result = run_scan(
            client, ScanOptions([b"lock:*"], POLICY, scan_count=10, mode=ReadMode.LUA)
        )
        assert result.scanned == len(keys)
        gen = int(client.get(keyspace.TENURE_GEN))
        assert client.hlen(keyspace.tenure_table(gen)) == len(keys)
    finally:
        client.close()


@pytest.mark.parametrize("mode", MODES)
def test_full_scan_writes_one_lease_per_lock(r: redis.Redis, mode: ReadMode) -> None:
    keys = fill(r, 1200)
    for _ in range(2):
        result = run_scan(r, ScanOptions([b"lock:*", b"lock:1*"], POLICY, scan_count=50, mode=mode))
        assert result.scanned == len(keys)
        gen = int(r.get(keyspace.TENURE_GEN))
        assert set(r.hkeys(keyspace.tenure_table(gen))) == keys
    assert result.worst[0].observations == 2


def _scan_reply(reply: list) -> bool:
    """A SCAN_KEYS_LUA reply (the keys found are item 7 of 12), not a read's."""
    return len(reply) == 12 and isinstance(reply[6], list)


def test_a_repeat_of_the_batch_in_hand_is_skipped(
    r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SCAN may return a key again (the keyspace was resized between two calls). A repeat of a
    batch the caller has not written yet (it is still being read or counted when the next reads
    are sent) cannot be seen by the read script: the scanner skips it. Simulated by adding each
    SCAN's first key to the next SCAN's keys."""
    keys = fill(r, 1000)
    receive = scanner_module.ScriptReader.receive
    scans: list[list] = []

    def repeating(self: object) -> list:
        reply = receive(self)  # type: ignore[arg-type]
        if _scan_reply(reply):
            if scans and scans[-1][6]:
                reply = [*reply[:6], [*reply[6], scans[-1][6][0]], *reply[7:]]
            scans.append(reply)
        return reply

    monkeypatch.setattr(scanner_module.ScriptReader, "receive", repeating)
    result = run_scan(r, ScanOptions([b"lock:*"], POLICY, scan_count=10, mode=ReadMode.LUA))
    assert len(scans) > 3
    assert result.scanned == len(keys)
    assert result.stats.duplicates == len(scans) - 1
    gen = int(r.get(keyspace.TENURE_GEN))
    assert set(r.hkeys(keyspace.tenure_table(gen))) == keys


def test_a_repeat_of_a_batch_not_yet_written_is_skipped(
    r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan writes tenure records every WRITE_EVERY records, not after each small batch: a
    key SCAN repeats from a batch whose records are not written yet is invisible to the script,
    so the scanner skips it itself. Simulated by adding the first key of the SCAN three back to
    each SCAN's keys, when its record is not written yet (a written one the read script itself
    skips)."""
    keys = fill(r, 2500)
    receive = scanner_module.ScriptReader.receive
    scans: list[list] = []
    injected = 0

    def repeating(self: object) -> list:
        nonlocal injected
        reply = receive(self)  # type: ignore[arg-type]
        if not _scan_reply(reply):
            return reply
        if len(scans) >= 3 and scans[-3][6]:
            first = scans[-3][6][0]
            if not r.hexists(keyspace.tenure_table(1), first):
                reply = [*reply[:6], [*reply[6], first], *reply[7:]]
                injected += 1
        scans.append(reply)
        return reply

    monkeypatch.setattr(scanner_module.ScriptReader, "receive", repeating)
    result = run_scan(r, ScanOptions([b"lock:*"], POLICY, scan_count=10, mode=ReadMode.LUA))
    assert len(scans) > 10
    assert len(keys) > 2 * loop.WRITE_EVERY  # records written in several goes
    assert injected > len(scans) / 2
    assert result.scanned == len(keys)
    assert result.stats.duplicates == injected
    gen = int(r.get(keyspace.TENURE_GEN))
    assert gen == 1
    assert set(r.hkeys(keyspace.tenure_table(gen))) == keys


def test_two_reads_are_queued_while_a_batch_is_counted(r: redis.Redis) -> None:
    """Redis does not wait for the client between batches: while the caller counts a batch,
    the next batch's read and the one after it (with its SCAN) are already sent."""
    keys = fill(r, 600)
    scanner = Scanner(r, count=10, mode=ReadMode.LUA, batch_keys=10)
    queued: list[int] = []
    seen: list[bytes] = []
    table = keyspace.tenure_table(9001)
    for batch in scanner.batches([b"lock:*"], keyspace.tenure_table(9000), table):
        assert scanner.reader is not None
        reads = [i for i in scanner.reader.unread if i.call and i.call[0] is scanner._read_script]
        queued.append(len(reads))
        seen.extend(snap.key for snap, _ in batch)
        r.hset(table, mapping={snap.key: b"r" for snap, _ in batch})
    assert sorted(seen) == sorted(keys)
    assert len(queued) > 20
    assert all(n == 2 for n in queued[:-3]), queued


@pytest.mark.real
def test_connection_lost_mid_scan_is_retried(redis_server: object, real_redis: redis.Redis) -> None:
    keys = fill(real_redis, 400)
    killer = redis_server.client()  # type: ignore[attr-defined]
    scanner = Scanner(real_redis, count=10, mode=ReadMode.LUA, batch_keys=20)
    seen: list[bytes] = []
    table = keyspace.tenure_table(9001)
    for i, batch in enumerate(scanner.batches([b"lock:*"], keyspace.tenure_table(9000), table)):
        seen.extend(snap.key for snap, _ in batch)
        real_redis.hset(table, mapping={snap.key: b"r" for snap, _ in batch})
        if i in (1, 4):
            assert killer.client_kill_filter(_type="normal", skipme=True) >= 1
    killer.close()
    assert sorted(seen) == sorted(keys)


@pytest.mark.real
def test_a_dense_keyspace_is_read_in_calls_smaller_than_the_scan_count(
    real_redis: redis.Redis,
) -> None:
    """SCAN COUNT 1000 over a keyspace of locks would read ~700 keys per script (several ms of
    Redis): the scripts' own measures size them down, and every lock is still read once."""
    keys = fill(real_redis, 3000)
    scanner = Scanner(real_redis, count=1000, mode=ReadMode.LUA)
    batches = collect(scanner, real_redis, [b"lock:*"])
    assert sorted(k for b in batches for k in b) == sorted(keys)
    assert scanner.sizer.next().count < 500
    assert scanner.stats.scan_calls >= 8
    assert max(len(b) for b in batches) < 400


@pytest.mark.real
def test_a_big_batch_of_tenure_records_is_written_in_short_hsets(real_redis: redis.Redis) -> None:
    records = {b"lock:%d" % i: b"record %d" % i for i in range(1000)}
    real_redis.config_resetstat()
    scans.write_table(real_redis, keyspace.tenure_table(9001), records)
    stats = real_redis.info("commandstats")["cmdstat_hset"]
    assert stats["calls"] == 1000 // scans.WRITE_CHUNK
    assert real_redis.hgetall(keyspace.tenure_table(9001)) == records
