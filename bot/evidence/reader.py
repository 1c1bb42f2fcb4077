"""The read after the scan: one pipeline of read-only commands for the kept findings, its replies
turned into each finding's `Impact`, and the findings put in the order of their score.

Per finding, by layout (`bot.evidence.names`): Redisson `PUBSUB NUMSUB` of the lock's channel and
`LLEN` of its fair-lock queue; Redisson read/write `PUBSUB NUMSUB` of its channel; BullMQ `LLEN`
wait and paused and `ZCARD` prioritized, and once per scan `CLIENT LIST` for the workers'
connection names. The pipeline opens with `CLIENT NO-TOUCH ON` and closes with `OFF`: on a server
before 7.2 both are refused and nothing else changes (these reads touch only the lists and sets
they count, never a lock).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import redis

from bot.core import logs
from bot.core.display import escape
from bot.core.impact import scored
from bot.core.model import FINDING_REASONS, Finding, Impact, Layout
from bot.evidence.names import (
    REDISSON_CHANNEL,
    REDISSON_QUEUE,
    REDISSON_RW_CHANNEL,
    BullQueue,
    bull_queue,
    redisson_name,
)
from bot.store import slots

#: Findings whose evidence is read, at most, per scan (the worst first).
EVIDENCE_LIMIT = 200
_log = logs.logger("evidence")
#: Turns the replies of one finding's reads (and the scan's CLIENT LIST) into its Impact fields.
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
        """Is any worker of `queue` connected? With the sentence that says what shows it."""
        if self.names is None:
            return None, self.refused or "CLIENT LIST not read"
        shown = escape(queue.queue, 60)
        n = sum(1 for name in self.names if queue.is_worker(name))
        if n == 0:
            return False, f"no worker connected to queue `{shown}`"
        return True, f"{n} worker connection{'s' if n != 1 else ''} for queue `{shown}`"


def rank(client: redis.Redis, findings: Sequence[Finding]) -> list[Finding]:
    """`findings` (a scan's kept list) with each finding's `impact`, the findings ordered by score
    (highest first) and the other kept keys (healthy, not a lock) after them as they were. Only
    the first EVIDENCE_LIMIT findings are read; a Redis error leaves every impact unknown."""
    flagged = [f for f in findings if f.reason in FINDING_REASONS]
    others = [f for f in findings if f.reason not in FINDING_REASONS]
    read, beyond = flagged[:EVIDENCE_LIMIT], flagged[EVIDENCE_LIMIT:]
    started = time.monotonic()
    if slots.is_cluster(client):
        impacts = [_unknown(f, "not read on a Redis Cluster") for f in read]
    else:
        try:
            impacts = _read(client, read)
        except redis.RedisError as exc:
            logs.event(
                _log,
                "evidence_failed",
                logging.WARNING,
                error=type(exc).__name__,
                findings=len(read),
            )
            impacts = [_unknown(f, f"not read ({type(exc).__name__})") for f in read]
    note = f"not read: only the {EVIDENCE_LIMIT} worst findings are examined"
    impacts += [_unknown(f, note) for f in beyond]
    ranked = [replace(f, impact=i) for f, i in zip(flagged, impacts, strict=True)]
    ranked.sort(key=lambda f: f.impact.score if f.impact else 0.0, reverse=True)
    if read:
        logs.event(
            _log,
            "evidence_read",
            logging.DEBUG,
            findings=len(read),
            blocking=sum(1 for f in ranked if f.impact is not None and f.impact.blocking),
            duration_ms=round((time.monotonic() - started) * 1000, 1),
        )
    return ranked + others


def _unknown(f: Finding, why: str) -> Impact:
    return scored(f.reason, f.held_seconds, owner_evidence=why)


def _read(client: redis.Redis, findings: Sequence[Finding]) -> list[Impact]:
    """One pipeline: NO-TOUCH on, every finding's reads, CLIENT LIST when a BullMQ lock is among
    them, NO-TOUCH off; then each finding's Impact from its replies."""
    pipe = client.pipeline(transaction=False)
    pipe.execute_command("CLIENT", "NO-TOUCH", "ON")
    plans: list[tuple[int, Interpret | None]] = []
    for f in findings:
        plans.append(_plan(pipe, f))
    need_clients = any(f.layout is Layout.BULLMQ for f in findings)
    if need_clients:
        pipe.client_list()
    pipe.execute_command("CLIENT", "NO-TOUCH", "OFF")
    replies = pipe.execute(raise_on_error=False)
    workers = Workers(replies[-2] if need_clients else None)
    out, at = [], 1
    for f, (n, interpret) in zip(findings, plans, strict=True):
        fields = interpret(replies[at : at + n], workers) if interpret is not None else {}
        out.append(scored(f.reason, f.held_seconds, **fields))
        at += n
    return out


def _plan(pipe: Any, f: Finding) -> tuple[int, Interpret | None]:
    """Queue `f`'s reads on `pipe`: how many, and how to read their replies."""
    if f.layout is Layout.REDISSON:
        pipe.pubsub_numsub(redisson_name(REDISSON_CHANNEL, f.key))
        pipe.llen(redisson_name(REDISSON_QUEUE, f.key))
        return 2, _redisson
    if f.layout is Layout.REDISSON_RW:
        pipe.pubsub_numsub(redisson_name(REDISSON_RW_CHANNEL, f.key))
        return 1, _redisson
    if f.layout is Layout.BULLMQ:
        queue = bull_queue(f.key)
        if queue is None:
            return 0, None
        wait, paused, prioritized = queue.keys
        pipe.llen(wait)
        pipe.llen(paused)
        pipe.zcard(prioritized)
        return 3, lambda replies, workers: _bullmq(queue, replies, workers)
    return 0, None


def _redisson(replies: list[Any], _workers: Workers) -> dict[str, Any]:
    """Subscribers of the lock's channel, plus the fair-lock queue's length when there is one."""
    subscribed = _numsub(replies[0])
    queued = replies[1] if len(replies) > 1 else 0
    if subscribed is None or not isinstance(queued, int):
        return {"owner_evidence": "waiters not read (the server refused PUBSUB NUMSUB or LLEN)"}
    return {
        "waiters": subscribed + queued,
        "owner_evidence": "Redis keeps no record of which Redisson instances are alive",
    }


def _numsub(reply: object) -> int | None:
    if isinstance(reply, list) and reply and isinstance(reply[0], tuple | list):
        count = reply[0][1]
        return int(count) if isinstance(count, int) else None
    return None


def _bullmq(queue: BullQueue, replies: list[Any], workers: Workers) -> dict[str, Any]:
    """The queue's waiting work (wait + paused + prioritized) and whether a worker is connected."""
    alive, evidence = workers.owner(queue)
    counts = [r for r in replies if isinstance(r, int) and not isinstance(r, bool)]
    backlog = sum(counts) if len(counts) == len(replies) else None
    return {"backlog": backlog, "owner_alive": alive, "owner_evidence": evidence}
