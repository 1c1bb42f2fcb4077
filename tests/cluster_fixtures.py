"""Redis Cluster fixtures for the tests (a pytest plugin, `tests/conftest.py`): `cluster`, one
3-primary cluster per test module, and `rc`, a cluster client on it with every primary flushed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis.cluster import RedisCluster

from tests.conftest import missing
from tests.embedded_cluster import EmbeddedCluster


def start_cluster(primaries: int = 3, replicas: int = 0) -> EmbeddedCluster:
    try:
        return EmbeddedCluster(primaries, replicas)
    except FileNotFoundError:
        missing("redis-server or redis-cli is not installed")


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    with start_cluster() as c:
        yield c


@pytest.fixture
def rc(cluster: EmbeddedCluster) -> Iterator[RedisCluster]:
    client = cluster.client()
    client.flushall(target_nodes=RedisCluster.PRIMARIES)
    yield client
    client.close()
