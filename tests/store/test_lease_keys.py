"""lockguard's leases are renewed and given back only while they hold exactly our token, with
scripting allowed and with it refused (then in a transaction), on a real redis-server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from bot.store import lease_keys
from tests.conftest import RedisServer

KEY = b"{lockguard}:test:lease"


@pytest.fixture(params=["scripts", "no-scripts"])
def client(
    request: pytest.FixtureRequest, redis_server: RedisServer, real_redis: redis.Redis
) -> Iterator[redis.Redis]:
    if request.param == "scripts":
        yield real_redis
        return
    real_redis.execute_command(
        "ACL", "SETUSER", "no-scripts", "reset", "on", ">pw", "~*", "&*", "+@all", "-@scripting"
    )
    c = redis_server.client(username="no-scripts", password="pw")
    with pytest.raises(redis.exceptions.NoPermissionError):
        c.eval("return 1", 0)
    yield c
    c.close()
    real_redis.execute_command("ACL", "DELUSER", "no-scripts")


def test_only_our_own_lease_is_given_back(client: redis.Redis, real_redis: redis.Redis) -> None:
    assert lease_keys.take(client, KEY, b"ours", 60_000)
    assert not lease_keys.take(client, KEY, b"theirs", 60_000)
    assert not lease_keys.give_back(client, KEY, b"theirs")
    assert real_redis.get(KEY) == b"ours"
    assert lease_keys.give_back(client, KEY, b"ours")
    assert not real_redis.exists(KEY)
    assert not lease_keys.give_back(client, KEY, b"ours")  # gone: nothing to do


def test_only_our_own_lease_is_renewed(client: redis.Redis, real_redis: redis.Redis) -> None:
    assert lease_keys.take(client, KEY, b"ours", 1_000)
    assert lease_keys.renew(client, KEY, b"ours", 60_000)
    assert real_redis.pttl(KEY) > 59_000
    real_redis.set(KEY, b"theirs", px=1_000)  # ours lapsed, another process took it
    assert not lease_keys.renew(client, KEY, b"ours", 60_000)
    assert 0 < real_redis.pttl(KEY) <= 1_000
    assert real_redis.get(KEY) == b"theirs"
