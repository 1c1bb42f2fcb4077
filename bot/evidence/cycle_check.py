"""Does an approved deadlock still hold? Read again just before its lock is released
(`bot.cases.recheck`): each lock of the cycle still held by the holder shown, and that holder
still queued, with its deadline ahead, in the next lock's fair-lock queue (`bot.evidence.queues`).

Short pipelines of read-only commands (LRANGE_PER_TRIP links each): `HEXISTS` of each link's
holder, `LRANGE` of the next lock's queue (its first QUEUE_READ entries, as the scan read them)
and `ZSCORE` of the holder's deadline there. The release itself then compares the exact
approved holder bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis

from bot.core.display import escape
from bot.core.redisson import queue_key, timeout_key
from bot.evidence.queues import LRANGE_PER_TRIP, QUEUE_READ

Cycle = tuple[tuple[bytes, bytes], ...]


def cycles_hold(client: redis.Redis, cycles: Sequence[Cycle], now_ms: int) -> list[str]:
    """For each cycle, "" when it still holds, else why not (one sentence, for people)."""
    if not any(cycles):
        return [_NONE for _ in cycles]
    links = [
        (cycle[i][0], holder, cycle[(i + 1) % len(cycle)][0])
        for cycle in cycles
        for i, (_, holder) in enumerate(cycle)
    ]
    replies = iter(_read_links(client, links))
    out = []
    for cycle in cycles:
        why = "" if cycle else _NONE
        for i, (key, holder) in enumerate(cycle):
            nxt = cycle[(i + 1) % len(cycle)][0]
            held, queue, deadline = next(replies), next(replies), next(replies)
            who = escape(holder, 60)
            if why:
                continue
            if not held:
                why = f"{escape(key, 60)} is no longer held by {who}"
            elif not isinstance(queue, list) or holder not in queue:
                why = f"{who} no longer waits for {escape(nxt, 60)}"
            elif not isinstance(deadline, int | float) or deadline <= now_ms:
                why = f"{who}'s wait for {escape(nxt, 60)} has passed its deadline"
        out.append(why)
    return out


def _read_links(client: redis.Redis, links: list[tuple[bytes, bytes, bytes]]) -> list[object]:
    """HEXISTS, LRANGE, ZSCORE of each (lock, holder, next lock), LRANGE_PER_TRIP links a
    round trip (each LRANGE reads up to QUEUE_READ entries: a pipeline runs back to back)."""
    replies: list[object] = []
    for at in range(0, len(links), LRANGE_PER_TRIP):
        with client.pipeline(transaction=False) as pipe:
            for key, holder, nxt in links[at : at + LRANGE_PER_TRIP]:
                pipe.hexists(key, holder)
                pipe.lrange(queue_key(nxt), 0, QUEUE_READ - 1)
                pipe.zscore(timeout_key(nxt), holder)
            replies.extend(pipe.execute())
    return replies


_NONE = "the approved deadlock names no cycle"
