"""A key whose slot starts moving between the pipelined read's two pipelines (TYPE, then the
value): on a Redis Cluster node the value read is redirected (ASK). The scan must count it as
moving, to be read on its new node once the move ends, not stop with "set REDIS_CLUSTER=true"
(seen in `tests/scan/test_cluster_resharding.py`'s pipeline run, about one time in four)."""

from __future__ import annotations

from typing import Any

import fakeredis
import redis

from bot.scan.pipelined import PipelinedReader
from bot.scan.types import ScanStats


class _MovingPipeline:
    """A pipeline whose value reads (STRLEN, GETRANGE) of `moved` are redirected."""

    def __init__(self, inner: Any, moved: bytes) -> None:
        self.inner, self.moved, self.calls = inner, moved, []

    def __enter__(self) -> _MovingPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.reset()

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> None:
            self.calls.append((name, args))
            getattr(self.inner, name)(*args, **kwargs)

        return call

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        replies = self.inner.execute(raise_on_error=raise_on_error)
        return [
            redis.exceptions.AskError("3999 127.0.0.1:7001")
            if name in ("strlen", "getrange") and args[0] == self.moved
            else reply
            for (name, args), reply in zip(self.calls, replies, strict=True)
        ]


def test_a_value_read_redirected_mid_batch_counts_as_moving_and_the_rest_is_read() -> None:
    client = fakeredis.FakeRedis()
    for name in (b"lock:a", b"lock:b", b"lock:c"):
        client.set(name, b"token-" + name, px=60_000)
    pipeline = client.pipeline

    def moving_pipeline(transaction: bool = True) -> _MovingPipeline:
        return _MovingPipeline(pipeline(transaction=transaction), b"lock:b")

    client.pipeline = moving_pipeline  # type: ignore[assignment,method-assign]
    stats = ScanStats()
    reader = PipelinedReader(client, stats, count=100, max_fields=16, max_value_bytes=512)
    keys = [snap.key for batch in reader.batches([b"lock:*"], b"t0", b"t1") for snap, _ in batch]
    assert sorted(keys) == [b"lock:a", b"lock:c"]
    assert stats.moving == 1  # the cluster scan reads it again where it went


def test_a_hash_replaced_by_a_string_between_the_two_pipelines_is_skipped_not_a_crash(
    r: redis.Redis,
) -> None:
    """HLEN/HSCAN of a key that stopped being a hash answer WRONGTYPE: the key seen is gone
    (counted as vanished), and the scan goes on with the rest. Before, the snapshot carried the
    error as its hash_len and the tally stopped with a TypeError. On fakeredis and a real
    server (`r`)."""
    client = r
    client.hset(b"lock:h", mapping={b"owner": b"w1", b"count": b"1"})
    client.set(b"lock:s", b"token", px=60_000)
    pipeline, opened = client.pipeline, []

    def replacing_pipeline(transaction: bool = True) -> Any:
        opened.append(1)
        if len(opened) == 2:  # the values pipeline: the facts were read as a hash
            client.delete(b"lock:h")
            client.set(b"lock:h", b"now a string")
        return pipeline(transaction=transaction)

    client.pipeline = replacing_pipeline  # type: ignore[assignment,method-assign]
    stats = ScanStats()
    reader = PipelinedReader(client, stats, count=100, max_fields=16, max_value_bytes=512)
    keys = [snap.key for batch in reader.batches([b"lock:*"], b"t0", b"t1") for snap, _ in batch]
    assert keys == [b"lock:s"]
    assert stats.vanished == 1
