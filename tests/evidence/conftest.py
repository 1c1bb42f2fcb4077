"""The evidence tests' real BullMQ (tests/node/bullmq.py): node installed once per session, and
per test a driver for each pinned BullMQ major (`bullmq` on the session's redis-server,
`bullmq_cluster` on the module's Redis Cluster), its workers stopped after the test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import RedisServer
from tests.embedded_cluster import EmbeddedCluster
from tests.node.bullmq import PACKAGES, BullMQ, ensure_installed


@pytest.fixture(scope="session")
def node_for_bullmq() -> str:
    """`node`, with tests/node's packages installed (skips, or fails under CI=true, without)."""
    return ensure_installed()


@pytest.fixture(params=sorted(PACKAGES), ids=lambda p: f"bullmq-{PACKAGES[p]}")
def bullmq(
    request: pytest.FixtureRequest, node_for_bullmq: str, redis_server: RedisServer
) -> Iterator[BullMQ]:
    """Real BullMQ (6.x, then 5.x) against the session's redis-server."""
    driver = BullMQ(node_for_bullmq, request.param, redis_server.port)
    yield driver
    driver.close()


@pytest.fixture(params=sorted(PACKAGES), ids=lambda p: f"bullmq-{PACKAGES[p]}")
def bullmq_cluster(
    request: pytest.FixtureRequest, node_for_bullmq: str, cluster: EmbeddedCluster
) -> Iterator[BullMQ]:
    """Real BullMQ (6.x, then 5.x) with an ioredis Cluster connection to the module's cluster."""
    port = cluster.primaries()[0].port
    driver = BullMQ(node_for_bullmq, request.param, port, cluster=True)
    yield driver
    driver.close()
