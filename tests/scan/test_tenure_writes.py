"""A scan of one server sends its tenure-table writes behind the batch call in flight, on the
batch scripts' own connection (no round trip of their own): every record still lands, a lost
connection sends them again, and a refused write fails the scan (nothing recorded as done),
on fakeredis and on the real server (`r`)."""

from __future__ import annotations

import pytest
import redis

from bot.core.rules import Policy
from bot.scan import ReadMode, loop
from bot.scan.result import ScanOptions
from bot.scan.script_reader import ScriptReader
from bot.store import keyspace, scans

POLICY = Policy(stale_threshold_ms=900_000)
N = 2 * loop.WRITE_EVERY + 300


def fill(client: redis.Redis) -> set[bytes]:
    keys = {b"lock:w:%d" % i for i in range(N)}
    with client.pipeline(transaction=False) as pipe:
        for k in keys:
            pipe.set(k, b"tok-" + k, px=600_000)
        pipe.execute()
    return keys


def options() -> ScanOptions:
    return ScanOptions([b"lock:*"], POLICY, scan_count=50, mode=ReadMode.LUA)


def behind_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The most records one HSET of each write sent behind a call carries."""
    sent: list[int] = []
    write = ScriptReader.write

    def counted(self: ScriptReader, commands: list[tuple[object, ...]]) -> bool:
        ok = write(self, commands)  # type: ignore[arg-type]
        if ok:
            sent.append(max((len(c) - 2) // 2 for c in commands))
        return ok

    monkeypatch.setattr(ScriptReader, "write", counted)
    return sent


def test_every_lease_record_lands(r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = fill(r)
    sent = behind_calls(monkeypatch)
    for observations in (1, 2):
        result = loop.run_scan(r, options(), keep=N)
        assert result.scanned == N
        assert {f.observations for f in result.worst} == {observations}
        table = keyspace.tenure_table(int(r.get(keyspace.TENURE_GEN)))
        assert set(r.hkeys(table)) == keys
    assert len(sent) == 4  # two writes of WRITE_EVERY records behind calls per scan
    assert max(sent) == scans.WRITE_CHUNK  # in HSETs of at most WRITE_CHUNK records


def test_a_refused_write_fails_the_scan(r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    fill(r)
    tenure_writes = scans.tenure_writes

    def refused(table: bytes, records: dict[bytes, bytes]) -> list[tuple[object, ...]]:
        return [*tenure_writes(table, records), ("HSET", table)]  # wrong number of arguments

    monkeypatch.setattr(scans, "tenure_writes", refused)
    with pytest.raises(redis.ResponseError):
        loop.run_scan(r, options())
    assert scans.last_scan(r) is None  # not recorded as done
    assert r.get(keyspace.TENURE_GEN) is None
    assert r.exists(keyspace.SCAN_LEASE) == 0  # the scan lease was given back
    assert r.ping()  # the connections are clean


@pytest.mark.real
def test_writes_behind_a_call_are_sent_again_after_a_lost_connection(
    redis_server: object, real_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = fill(real_redis)
    killer = redis_server.client()  # type: ignore[attr-defined]
    write = ScriptReader.write
    kills = 0

    def then_killed(self: ScriptReader, commands: list[tuple[object, ...]]) -> bool:
        nonlocal kills
        ok = write(self, commands)  # type: ignore[arg-type]
        kills += killer.client_kill_filter(_type="normal", skipme=True)
        return ok

    monkeypatch.setattr(ScriptReader, "write", then_killed)
    result = loop.run_scan(real_redis, options())
    killer.close()
    assert kills >= 2
    assert result.scanned == N
    gen = int(real_redis.get(keyspace.TENURE_GEN))
    assert set(real_redis.hkeys(keyspace.tenure_table(gen))) == keys


def test_lease_writes_are_packed_byte_for_byte_as_redis_py_would() -> None:
    """The writes behind a call are packed by hiredis directly (no per-item check in Python):
    the bytes on the wire are redis-py's own, for binary and huge keys and values too, and an
    item hiredis does not take as it is (a bytearray) is packed by redis-py."""
    from bot.scan.script_reader import _packed

    conn = redis.Redis().connection_pool.make_connection()  # never connected
    records = {
        b"lock:\r\n*1\r\n$4\r\nPING": b"\x00\xff" * 41,
        b"lock:" + bytes(range(256)): b"",
        b"lock:big:" + b"k" * 70_000: b"v" * 100_000,
        **{b"lock:%d" % i: b"r%d" % i for i in range(450)},
    }
    commands = scans.tenure_writes(keyspace.tenure_table(3), records)
    assert len(commands) > 2
    assert b"".join(_packed(conn, commands)) == b"".join(conn.pack_commands(commands))
    odd = [(b"HSET", b"t", bytearray(b"k"), b"v")]
    assert b"".join(_packed(conn, odd)) == b"".join(conn.pack_commands(odd))


def test_binary_lock_keys_get_their_exact_tenure_records(r: redis.Redis) -> None:
    keys = {b"lock:\r\n$-1\r\n", b"lock:\x00\xff", b"lock:<@U123>*bold*", b"lock:" + b"x" * 4000}
    for k in keys:
        r.set(k, b"tok", px=600_000)
    result = loop.run_scan(r, options())
    assert result.scanned == len(keys)
    gen = int(r.get(keyspace.TENURE_GEN))
    assert set(r.hkeys(keyspace.tenure_table(gen))) == keys
