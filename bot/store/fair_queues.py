"""Whom a Redisson fair lock's unlock would wake now, read from Redis (`next_waiters`): the one
read behind the evidence's "the release wakes its next queued thread"
(`bot.evidence.reader.fair_heads`) and the release's own wake-up (`bot.release.waiters.FairWake`),
so what a finding says the release wakes is what it wakes. The rule is pure
(`bot.core.redisson.next_waiter`); this only reads what it needs.

Read-only and short: the server's `TIME` (Redisson's deadlines are in its clock), `LRANGE` of each
queue's first HEAD_LOOK threads, then `ZSCORE` of each of
those threads' deadlines; CALLS_PER_TRIP commands a round trip, each O(1) or O(HEAD_LOOK). On one
server each round trip opens with `CLIENT NO-TOUCH ON` and closes with `OFF` (refused before
Redis 7.2, and nothing else changes; not counted as refused). A refused read leaves that queue's
next thread unknown (None), counted in `refused`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from bot.core import clock
from bot.core.redisson import HEAD_LOOK, next_waiter
from bot.store import slots

#: Commands per round trip, as the release's scripts (`bot.release.runner.PIPELINE_CALLS`):
#: Redis runs every command of one read of a client's socket before it serves anyone else, so a
#: round trip's commands are one stretch of its time. 32 short reads (an LRANGE of 100 entries
#: is a few µs) hold it for well under 0.1 ms; 500 of them held it for about 1 ms at once.
CALLS_PER_TRIP = 32

#: (method, args) of one read command.
Call = tuple[str, tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Waiters:
    #: Per queue, the thread its unlock wakes, or None (no live thread, or not known).
    threads: list[bytes | None]
    #: Reads the server refused (ACL, unknown command): their queues' threads are None.
    refused: int = 0


def next_waiters(client: redis.Redis, queues: Sequence[tuple[bytes, bytes]]) -> Waiters:
    """Per (queue, timeouts) of a fair lock: the thread `RedissonFairLock`'s unlock would wake,
    by the server's clock now."""
    now, lists = _time_and_queues(client, [q for q, _ in queues])
    if now is None:
        return Waiters([None] * len(queues), 1)
    refused = sum(isinstance(r, Exception) for r in lists)
    ids = [_threads(r) for r in lists]
    calls = [
        ("zscore", (t, thread))
        for (_, t), threads in zip(queues, ids, strict=True)
        for thread in threads
    ]
    scores = run(client, calls)
    refused += sum(isinstance(r, Exception) for r in scores)
    out: list[bytes | None] = []
    at = 0
    for threads in ids:
        out.append(next_waiter(threads, scores[at : at + len(threads)], now))
        at += len(threads)
    return Waiters(out, refused)


def _threads(reply: object) -> list[Any]:
    return list(reply[:HEAD_LOOK]) if isinstance(reply, list | tuple) else []


def _time_and_queues(client: redis.Redis, queues: list[bytes]) -> tuple[int | None, list[Any]]:
    """The server's clock (ms; None when refused) and each queue's first HEAD_LOOK threads (or
    the error reply): TIME in the first round trip (a cluster: its own call, to any node)."""
    calls = [("lrange", (q, 0, HEAD_LOOK - 1)) for q in queues]
    if slots.is_cluster(client):
        try:
            now: object = client.time()
        except redis.RedisError:
            return None, []
        replies = run(client, calls)
    else:
        replies = run(client, [("time", ()), *calls])
        now, replies = replies[0], replies[1:]
    if not isinstance(now, tuple | list):
        return None, []
    return clock.time_ms(*now), replies


def run(client: redis.Redis, calls: Sequence[Call]) -> list[Any]:
    """Each call's reply or its error (not raised), CALLS_PER_TRIP a round trip."""
    out: list[Any] = []
    touch = not slots.is_cluster(client)
    for at in range(0, len(calls), CALLS_PER_TRIP):
        with client.pipeline(transaction=False) as pipe:
            if touch:
                pipe.execute_command("CLIENT", "NO-TOUCH", "ON")
            for method, args in calls[at : at + CALLS_PER_TRIP]:
                getattr(pipe, method)(*args)
            if touch:
                pipe.execute_command("CLIENT", "NO-TOUCH", "OFF")
            replies = pipe.execute(raise_on_error=False)
        out.extend(replies[1:-1] if touch else replies)
    return out
