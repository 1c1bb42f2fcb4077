"""The batch reads' connection (`bot.scan.script_reader`) keeps several calls, of two scripts,
and lease writes in flight: every reply comes back to the call that asked for it, in order,
after a lost connection and after a flushed script cache too, and every write lands. Real
server: these are Redis's own connection and script-cache semantics."""

from __future__ import annotations

import pytest
import redis

from bot.scan.script_reader import ScriptReader

pytestmark = pytest.mark.real

ECHO = "return {'echo', ARGV[1]}"
COUNT = "return {'count', ARGV[1], redis.call('HLEN', KEYS[1])}"


def queue(client: redis.Redis) -> ScriptReader:
    """Two scripts' calls with writes between them, all sent before any reply is read."""
    reader = ScriptReader(client)
    echo, count = client.register_script(ECHO), client.register_script(COUNT)
    client.script_load(ECHO)
    client.script_load(COUNT)
    reader.send(echo, [], [1])
    assert reader.write([("HSET", b"t", b"k1", b"v1"), ("HSET", b"t", b"k2", b"v2")])
    reader.send(count, [b"t"], [2])
    assert reader.write([("HSET", b"t", b"k3", b"\x00\r\n")])
    reader.send(echo, [], [3])
    reader.send(count, [b"t"], [4])
    assert reader.in_flight == 4
    return reader


def read_all(reader: ScriptReader) -> list[list[object]]:
    replies = [reader.receive() for _ in range(4)]
    reader.flush()
    reader.close()
    return replies


EXPECTED = [[b"echo", b"1"], [b"count", b"2", 2], [b"echo", b"3"], [b"count", b"4", 3]]
#: Sent again, a call runs after every write that was sent with it (those ran the first time):
#: the second call may then count 3 records. It only reads, so that is a later, equally true
#: reading, which is why sending everything again is harmless.
AGAIN = [EXPECTED[0], [b"count", b"2", 3], *EXPECTED[2:]]


def test_replies_come_back_to_their_calls_in_order(real_redis: redis.Redis) -> None:
    assert read_all(queue(real_redis)) == EXPECTED
    assert real_redis.hgetall(b"t") == {b"k1": b"v1", b"k2": b"v2", b"k3": b"\x00\r\n"}


def test_a_lost_connection_sends_everything_unread_again(
    redis_server: object, real_redis: redis.Redis
) -> None:
    reader = queue(real_redis)
    killer = redis_server.client()  # type: ignore[attr-defined]
    assert killer.client_kill_filter(_type="normal", skipme=True) >= 1
    killer.close()
    assert read_all(reader) in (EXPECTED, AGAIN)
    assert real_redis.hlen(b"t") == 3


def test_a_flushed_script_cache_loads_both_scripts_and_asks_again(
    real_redis: redis.Redis,
) -> None:
    reader = queue(real_redis)  # loads both scripts, then sends
    real_redis.script_flush()
    reader.send(real_redis.register_script(ECHO), [], [5])  # answered NOSCRIPT
    assert reader.write([("HSET", b"t", b"k4", b"v4")])
    replies = [reader.receive() for _ in range(5)]
    reader.flush()
    reader.close()
    assert replies[:4] in (EXPECTED, AGAIN)
    assert replies[4] == [b"echo", b"5"]
    assert real_redis.hlen(b"t") == 4
    errors = real_redis.info("errorstats")
    assert errors["errorstat_NOSCRIPT"]["count"] >= 1


def test_a_script_error_raises_and_leaves_the_client_usable(real_redis: redis.Redis) -> None:
    reader = ScriptReader(real_redis)
    fails = real_redis.register_script("return redis.call('HLEN', KEYS[1])")
    real_redis.set(b"s", b"string")
    reader.send(fails, [b"s"], [])
    reader.send(real_redis.register_script(ECHO), [], [1])
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        reader.receive()
    reader.close()  # a reply was never read: the connection is dropped, not reused
    assert real_redis.ping()
    assert real_redis.get(b"s") == b"string"
