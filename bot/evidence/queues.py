"""Redisson fair-lock queues, read after a scan in short pipelines (`bot.evidence.deadlock`).

For each lock name: `LRANGE redisson_lock_queue:{NAME} 0 QUEUE_READ-1` (the waiting threads,
`<uuid>:<threadId>`, first in line first), and for chosen (lock, waiter) pairs `ZSCORE
redisson_lock_timeout:{NAME} <waiter>` (the waiter's deadline, ms: Redisson drops a waiter whose
deadline has passed at the next try of anyone). Read-only, O(1) or O(QUEUE_READ) each: CHUNK
O(1) commands or LRANGE_PER_TRIP queue reads per round trip, each round trip opened by
`CLIENT NO-TOUCH ON` and closed by `OFF` (a server before 7.2 refuses both and nothing else
changes).

Most Redisson locks are not fair locks, and Redis deletes an empty list: so on one server the
queues are first asked for in groups, `EXISTS` of GROUP queue keys at once (O(GROUP);
EXISTS_PER_TRIP keys a round trip), and only the groups where one exists are read with `LRANGE`.
On a Redis Cluster a multi-key `EXISTS` would cross slots: each queue is read with `LRANGE` on the
primary of its lock's slot (the queue, the timeouts and the lock share it: Redisson's hash tag),
through that node's own connection.
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
#: `LRANGE`s of QUEUE_READ entries per round trip, as the release's queue reads
#: (`bot.store.fair_queues.CALLS_PER_TRIP`). Redis runs a pipeline's commands back to back
#: before it serves anyone else: 500 full queues held it 2.7 ms (5.4 µs each, Redis 7.0), 32
#: hold it about 0.15 ms.
LRANGE_PER_TRIP = CALLS_PER_TRIP
#: Queue keys per `EXISTS` (one server): O(GROUP) on the server, a few microseconds.
GROUP = 50
#: Queue keys asked for per round trip with `EXISTS` (100 commands of GROUP): well under 0.1 ms
#: of server time (measured on Redis 7.0: 0.7 µs per `EXISTS` of 50 missing keys).
EXISTS_PER_TRIP = 5000


def read_queues(client: redis.Redis, names: Sequence[bytes]) -> dict[bytes, list[bytes]]:
    """name -> its queue's first QUEUE_READ entries, for the names whose queue is not empty.
    A refused read raises (`redis.RedisError`): the caller says the check could not be made."""
    if not slots.is_cluster(client):
        names = _existing(client, names)
    calls = [(n, "lrange", (queue_key(n), 0, QUEUE_READ - 1)) for n in names]
    replies = _run(client, calls, LRANGE_PER_TRIP)
    return {n: list(r) for n, r in replies if isinstance(r, list) and r}


def _existing(client: redis.Redis, names: Sequence[bytes]) -> list[bytes]:
    """The names of the groups (of GROUP) in which some queue exists: the only ones to read."""
    groups = [names[at : at + GROUP] for at in range(0, len(names), GROUP)]
    calls = [(g, "exists", tuple(queue_key(n) for n in g)) for g in groups]
    return [n for g, count in _run(client, calls, EXISTS_PER_TRIP // GROUP) if count for n in g]


def read_deadlines(
    client: redis.Redis, pairs: Sequence[tuple[bytes, bytes]]
) -> dict[tuple[bytes, bytes], int]:
    """(name, waiter) -> the waiter's deadline in ms, for the pairs that have one."""
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
