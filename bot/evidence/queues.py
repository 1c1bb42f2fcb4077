"""Redisson fair-lock queues (`LRANGE`, the first QUEUE_READ threads) and waiters' deadlines
(`ZSCORE` of the timeout set), read after a scan for `bot.evidence.deadlock` in short read-only
round trips under `CLIENT NO-TOUCH` (refused before 7.2, harmlessly).

Most Redisson locks are not fair locks and Redis deletes an empty list, so on one server the
queues are first asked for with `EXISTS` of GROUP keys at once and only groups with one are read.
On a Redis Cluster that would cross slots: each queue is read on its lock's primary.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

import redis

from bot.core.redisson import queue_key, timeout_key
from bot.store import slots
from bot.store.fair_queues import CALLS_PER_TRIP

#: Queue entries read per lock (the first in line): a longer queue's rest is not read.
QUEUE_READ = 100
#: O(1) commands (`ZSCORE`) per round trip.
CHUNK = 500
#: `LRANGE`s of QUEUE_READ entries per round trip (Redis serves no one else meanwhile): 32 hold it
#: about 0.15 ms.
LRANGE_PER_TRIP = CALLS_PER_TRIP
#: Queue keys per `EXISTS` (one server), and per round trip (well under 0.1 ms of server time).
GROUP = 50
EXISTS_PER_TRIP = 5000


def read_queues(client: redis.Redis, names: Sequence[bytes]) -> dict[bytes, list[bytes]]:
    """name -> its queue's first QUEUE_READ entries, for non-empty queues; a refused read raises."""
    if not slots.is_cluster(client):
        names = _existing(client, names)
    calls = [(n, "lrange", (queue_key(n), 0, QUEUE_READ - 1)) for n in names]
    replies = _run(client, calls, LRANGE_PER_TRIP)
    return {n: list(r) for n, r in replies if isinstance(r, list) and r}


def _existing(client: redis.Redis, names: Sequence[bytes]) -> list[bytes]:
    """The names of the groups in which some queue exists: the only ones to read."""
    groups = [names[at : at + GROUP] for at in range(0, len(names), GROUP)]
    calls = [(g, "exists", tuple(queue_key(n) for n in g)) for g in groups]
    return [n for g, count in _run(client, calls, EXISTS_PER_TRIP // GROUP) if count for n in g]


def read_deadlines(
    client: redis.Redis, pairs: Sequence[tuple[bytes, bytes]]
) -> dict[tuple[bytes, bytes], int]:
    calls = [((n, w), "zscore", (timeout_key(n), w)) for n, w in pairs]
    out = {}
    for pair, score in _run(client, calls):
        if isinstance(score, int | float) and not isinstance(score, bool):
            out[pair] = int(score)
    return out


def _run(
    client: redis.Redis, calls: Sequence[tuple[Any, str, tuple[Any, ...]]], per_trip: int = CHUNK
) -> Iterator[Any]:
    """(tag, reply) of every call, `per_trip` a round trip, on the node of its first key."""
    if not calls:
        return
    if slots.is_cluster(client):
        by_node: dict[str, list[tuple[Any, str, tuple[Any, ...]]]] = defaultdict(list)
        nodes = {}
        for call in calls:
            node = client.get_node_from_key(call[2][0])  # type: ignore[attr-defined]
            by_node[node.name].append(call)
            nodes[node.name] = node
        for name, node_calls in by_node.items():
            conn = client.get_redis_connection(nodes[name])  # type: ignore[attr-defined]
            yield from _chunks(conn, node_calls, per_trip)
        return
    yield from _chunks(client, calls, per_trip)


def _chunks(
    conn: redis.Redis, calls: Sequence[tuple[Any, str, tuple[Any, ...]]], per_trip: int
) -> Iterator[Any]:
    for at in range(0, len(calls), per_trip):
        part = calls[at : at + per_trip]
        pipe = conn.pipeline(transaction=False)
        pipe.execute_command("CLIENT", "NO-TOUCH", "ON")
        for _, method, args in part:
            getattr(pipe, method)(*args)
        pipe.execute_command("CLIENT", "NO-TOUCH", "OFF")
        replies = pipe.execute(raise_on_error=False)[1:-1]
        for (tag, _, _), reply in zip(part, replies, strict=True):
            if isinstance(reply, Exception):
                raise reply
            yield tag, reply
