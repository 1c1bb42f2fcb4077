"""The read after the scan on a Redis Cluster: one pipeline per primary (under `CLIENT
NO-TOUCH`), each asking that node what only it can tell.

- Redisson: `PUBSUB NUMSUB` of the lock's channel on every primary (a plain subscription counts
  only on the node the client chose), `PUBSUB SHARDNUMSUB` and the fair queue's `LLEN` on the
  channel's slot's primary (a server without sharded pub/sub has none: 0); a non-empty queue is
  then read there for a live head (`reader.fair_heads`).
- BullMQ: `wait`, `paused`, `prioritized` on each key's primary, and `CLIENT LIST` of every
  primary: a worker of the queue connected to any of them counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
from redis.cluster import RedisCluster

from bot.core.impact import scored
from bot.core.model import Finding, Impact, Layout
from bot.core.redisson import CHANNEL, QUEUE, redisson_name
from bot.evidence.names import bull_queue
from bot.evidence.reader import (
    NO_RECORD,
    Workers,
    bullmq_fields,
    fair_heads,
    fair_queue,
    numsub,
    with_head,
)

#: (node name, index of the reply in that node's pipeline)
Ref = tuple[str, int]


class _Pipes:
    """One pipeline per primary, and where each queued command's reply will be."""

    def __init__(self, rc: RedisCluster) -> None:
        self.rc = rc
        self.nodes = {n.name: n for n in rc.get_primaries()}
        self.pipes = {
            name: rc.get_redis_connection(node).pipeline(transaction=False)
            for name, node in self.nodes.items()
        }
        self.count = dict.fromkeys(self.nodes, 0)
        for name in self.nodes:
            self.add(name, "execute_command", "CLIENT", "NO-TOUCH", "ON")

    def add(self, node: str, method: str, *args: Any) -> Ref:
        getattr(self.pipes[node], method)(*args)
        self.count[node] += 1
        return node, self.count[node] - 1

    def node_of(self, key: bytes) -> str:
        return str(self.rc.get_node_from_key(key).name)

    def run(self) -> dict[str, list[Any]]:
        for name in self.nodes:
            self.add(name, "execute_command", "CLIENT", "NO-TOUCH", "OFF")
        return {name: pipe.execute(raise_on_error=False) for name, pipe in self.pipes.items()}


def read_cluster(rc: RedisCluster, findings: Sequence[Finding]) -> list[Impact]:
    pipes = _Pipes(rc)
    plans = [_plan(pipes, f) for f in findings]
    clients: list[Ref] = []
    if any(kind == "bullmq" for kind, _ in plans):
        clients = [pipes.add(name, "client_list") for name in pipes.nodes]
    replies = pipes.run()
    workers = _workers([replies[n][i] for n, i in clients])
    out: list[dict[str, Any]] = []
    fair: dict[str, list[int]] = {}  # home node -> the findings whose fair queue is not empty
    for f, (kind, refs) in zip(findings, plans, strict=True):
        got = [replies[n][i] for n, i in refs]
        fields: dict[str, Any] = {}
        if kind == "redisson":
            fields = _redisson(got)
            if fields.pop("_queued", 0):
                fair.setdefault(refs[-1][0], []).append(len(out))
        elif kind == "bullmq":
            queue = bull_queue(f.key)
            assert queue is not None  # planned only when it parsed
            fields = bullmq_fields(queue, got, workers)
        out.append(fields)
    for node, at in fair.items():  # the queue, its timeouts and the lock share the lock's slot
        conn = rc.get_redis_connection(pipes.nodes[node])
        heads = fair_heads(conn, [fair_queue(findings[i].key) for i in at])
        for i, live in zip(at, heads, strict=True):
            out[i] = with_head(out[i], live)
    return [scored(f.reason, f.held_seconds, **kw) for f, kw in zip(findings, out, strict=True)]


def _plan(pipes: _Pipes, f: Finding) -> tuple[str, list[Ref]]:
    if f.layout is Layout.REDISSON:
        channel = redisson_name(CHANNEL, f.key)
        queue = redisson_name(QUEUE, f.key)
        home = pipes.node_of(channel)  # the channel, the queue and the lock share one slot
        refs = [pipes.add(n, "pubsub_numsub", channel) for n in pipes.nodes]
        refs.append(pipes.add(home, "pubsub_shardnumsub", channel))
        refs.append(pipes.add(home, "llen", queue))
        return "redisson", refs
    queue_of = bull_queue(f.key) if f.layout is Layout.BULLMQ else None
    if queue_of is not None:
        wait, paused, prioritized = queue_of.keys
        return "bullmq", [
            pipes.add(pipes.node_of(wait), "llen", wait),
            pipes.add(pipes.node_of(paused), "llen", paused),
            pipes.add(pipes.node_of(prioritized), "zcard", prioritized),
        ]
    return "", []


def _redisson(replies: list[Any]) -> dict[str, Any]:
    *plain, shard, queued = replies
    counts = [numsub(r) for r in plain]
    sharded = numsub(shard) if not isinstance(shard, Exception) else _absent(shard)
    if None in counts or sharded is None or not isinstance(queued, int):
        return {"owner_evidence": "waiters not read (a primary refused PUBSUB or LLEN)"}
    plain_subscribed = sum(c for c in counts if c is not None)
    return {
        "waiters": plain_subscribed + sharded + queued,
        # the release's PUBLISH reaches plain subscribers, not sharded ones; its fair-lock
        # wake-up the queue's live head, however it subscribed (`with_head`)
        "woken": plain_subscribed,
        "_queued": queued,
        "owner_evidence": NO_RECORD,
    }


def _absent(error: Exception) -> int | None:
    """0 when the server has no sharded pub/sub at all (so no sharded subscriber), else None."""
    if isinstance(error, redis.exceptions.NoPermissionError):
        return None
    return 0 if "unknown" in str(error).lower() else None


def _workers(lists: list[Any]) -> Workers:
    """Every primary's CLIENT LIST as one: refused on any, it is refused."""
    refused = next((r for r in lists if isinstance(r, Exception)), None)
    if refused is not None:
        return Workers(refused)
    return Workers([c for reply in lists if isinstance(reply, list) for c in reply])
