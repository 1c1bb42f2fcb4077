"""Does an approved deadlock still hold, just before its lock is released (`bot.cases.recheck`)?
Each lock of the cycle still held by the holder shown, and that holder still queued, its deadline
ahead, in the next lock's fair queue (its first QUEUE_READ entries, as the scan read them).
"""

from __future__ import annotations

from collections.abc import Sequence

import redis

from bot.core.display import escape
from bot.core.redisson import queue_key, timeout_key
from bot.evidence.queues import QUEUE_READ
from bot.store import fair_queues

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
    """HEXISTS, LRANGE, ZSCORE of each (lock, holder, next lock); the first error raised."""
    calls = [
        call
        for key, holder, nxt in links
        for call in (
            ("hexists", (key, holder)),
            ("lrange", (queue_key(nxt), 0, QUEUE_READ - 1)),
            ("zscore", (timeout_key(nxt), holder)),
        )
    ]
    replies = fair_queues.run(client, calls)
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


_NONE = "the approved deadlock names no cycle"
