"""The read after the scan on one server: one read-only pipeline for the findings (Redisson
`PUBSUB NUMSUB` of the channel and `LLEN` of the fair queue; BullMQ `LLEN`/`ZCARD` of its queue and
one `CLIENT LIST`), under `CLIENT NO-TOUCH` (refused before 7.2: these reads never touch a lock
anyway). A non-empty fair queue gets one more read (`fair_heads`): has it a thread the release
wakes?
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import redis

from bot.core.display import escape
from bot.core.impact import scored
from bot.core.model import Finding, Impact, Layout
from bot.core.redisson import (
    CHANNEL,
    QUEUE,
    RW_CHANNEL,
    queue_key,
    redisson_name,
    timeout_key,
)
from bot.evidence.names import BullQueue, bull_queue
from bot.store.fair_queues import next_waiters

#: A Redisson finding's `owner_evidence` when nothing showed its owner (`ranking` replaces exactly
#: this sentence, and no other, with what the scan showed).
NO_RECORD = "Redis keeps no record of which Redisson instances are alive"
Interpret = Callable[[list[Any], "Workers"], dict[str, Any]]


class Workers:
    """What `CLIENT LIST` showed: connection names, or why it could not be read."""

    def __init__(self, reply: object) -> None:
        self.names: list[bytes] | None = None
        self.refused = ""
        if isinstance(reply, redis.exceptions.NoPermissionError):
            self.refused = "CLIENT LIST refused: this Redis user may not run it (ACL)"
        elif isinstance(reply, Exception):
            said = escape(str(reply).encode(), 80) or type(reply).__name__
            self.refused = f"CLIENT LIST refused by the server ({said})"
        elif isinstance(reply, list):
            self.names = [str(c.get("name", "")).encode() for c in reply if isinstance(c, dict)]

    def owner(self, queue: BullQueue) -> tuple[bool | None, str]:
        if self.names is None:
            return None, self.refused or "CLIENT LIST not read"
        shown = escape(queue.queue, 60)
        n = sum(1 for name in self.names if queue.is_worker(name))
        if n == 0:
            return False, f"no worker connected to queue `{shown}`"
        return True, f"{n} worker connection{'s' if n != 1 else ''} for queue `{shown}`"


def read(client: redis.Redis, findings: Sequence[Finding]) -> list[Impact]:
    pipe = client.pipeline(transaction=False)
    pipe.execute_command("CLIENT", "NO-TOUCH", "ON")
    plans = [_plan(pipe, f) for f in findings]
    if not any(n for n, _ in plans):  # nothing Redis could tell: no round trip at all
        return [scored(f.reason, f.held_seconds) for f in findings]
    need_clients = any(f.layout is Layout.BULLMQ for f in findings)
    if need_clients:
        pipe.client_list()
    pipe.execute_command("CLIENT", "NO-TOUCH", "OFF")
    replies = pipe.execute(raise_on_error=False)
    workers = Workers(replies[-2] if need_clients else None)
    got, at = [], 1
    for n, interpret in plans:
        got.append(interpret(replies[at : at + n], workers) if interpret is not None else {})
        at += n
    queued = [fields.pop("_queued", 0) for fields in got]
    fair = [i for i, (f, n) in enumerate(zip(findings, queued, strict=True)) if _fair(f, n)]
    if fair:
        queues = [fair_queue(findings[i].key) for i in fair]
        for i, live in zip(fair, fair_heads(client, queues), strict=True):
            got[i] = with_head(got[i], live)
    return [
        scored(f.reason, f.held_seconds, **fields) for f, fields in zip(findings, got, strict=True)
    ]


def fair_queue(key: bytes) -> tuple[bytes, bytes]:
    return queue_key(key), timeout_key(key)


def _fair(f: Finding, queued: object) -> bool:
    return f.layout is Layout.REDISSON and isinstance(queued, int) and queued > 0


def with_head(fields: dict[str, Any], live: bool) -> dict[str, Any]:
    """The fair queue's live head counted among the woken: the release wakes it."""
    if live and isinstance(fields.get("woken"), int):
        return {**fields, "woken": fields["woken"] + 1}
    return fields


def fair_heads(client: redis.Redis, queues: Sequence[tuple[bytes, bytes]]) -> list[bool]:
    """Per (queue, timeouts): has it a thread `FairWake` would wake (by the same read)? A refused
    read says no."""
    return [t is not None for t in next_waiters(client, queues).threads]


def _plan(pipe: Any, f: Finding) -> tuple[int, Interpret | None]:
    if f.layout is Layout.REDISSON:
        pipe.pubsub_numsub(redisson_name(CHANNEL, f.key))
        pipe.llen(redisson_name(QUEUE, f.key))
        return 2, _redisson
    if f.layout is Layout.REDISSON_RW:
        pipe.pubsub_numsub(redisson_name(RW_CHANNEL, f.key))
        return 1, _redisson
    if f.layout is Layout.BULLMQ:
        queue = bull_queue(f.key)
        if queue is None:
            return 0, None
        wait, paused, prioritized = queue.keys
        pipe.llen(wait)
        pipe.llen(paused)
        pipe.zcard(prioritized)
        return 3, lambda replies, workers: bullmq_fields(queue, replies, workers)
    return 0, None


def _redisson(replies: list[Any], _workers: Workers) -> dict[str, Any]:
    subscribed = numsub(replies[0])
    queued = replies[1] if len(replies) > 1 else 0
    if subscribed is None or not isinstance(queued, int):
        return {"owner_evidence": "waiters not read (the server refused PUBSUB NUMSUB or LLEN)"}
    return {
        # queued threads subscribe to channels of their own, not this one: counted once
        "waiters": subscribed + queued,
        # the unlock message reaches the subscribers; the fair queue's head is added by `with_head`
        "woken": subscribed,
        "_queued": queued,
        "owner_evidence": NO_RECORD,
    }


def numsub(reply: object) -> int | None:
    if isinstance(reply, list) and reply and isinstance(reply[0], tuple | list):
        count = reply[0][1]
        return int(count) if isinstance(count, int) else None
    return None


def bullmq_fields(queue: BullQueue, replies: list[Any], workers: Workers) -> dict[str, Any]:
    alive, evidence = workers.owner(queue)
    counts = [r for r in replies if isinstance(r, int) and not isinstance(r, bool)]
    backlog = sum(counts) if len(counts) == len(replies) else None
    return {"backlog": backlog, "owner_alive": alive, "owner_evidence": evidence}
