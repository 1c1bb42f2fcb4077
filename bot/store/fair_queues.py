"""Whom a Redisson fair lock's unlock would wake now (`next_waiters`): the one read behind both
the evidence and the release's wake-up, so what a finding says the release wakes is what it wakes.

Read-only and short: `TIME` (Redisson's deadlines are in the server's clock), the first HEAD_LOOK
threads of each queue, their deadlines; CALLS_PER_TRIP commands a round trip. On one server each
trip is wrapped in `CLIENT NO-TOUCH ON`/`OFF` (refused before Redis 7.2: harmless). A refused
read leaves that queue's thread unknown (None), counted in `refused`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from bot.core import clock
from bot.core.redisson import HEAD_LOOK, next_waiter
from bot.store import slots

#: Commands per round trip: Redis runs a socket read's commands before serving anyone else, so
#: one trip is one stretch of its time (32 short reads: well under 0.1 ms).
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
    ids = [list(r[:HEAD_LOOK]) if isinstance(r, list | tuple) else [] for r in lists]
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


def _time_and_queues(client: redis.Redis, queues: list[bytes]) -> tuple[int | None, list[Any]]:
    """The server's clock (ms; None when refused) and each queue's first HEAD_LOOK threads (or
    the error reply)."""
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
