"""The findings a scan keeps, each with its `Impact` (`bot.evidence.reader` on one server,
`bot.evidence.cluster` on a Redis Cluster), in the order of their score, highest first; and
`record_ranked`, which keeps the worst of them in the last-scan record (digests, the Home tab)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import redis

from bot.core import logs
from bot.core.impact import scored
from bot.core.model import FINDING_REASONS, Finding, Impact
from bot.evidence.cluster import read_cluster
from bot.evidence.reader import NO_RECORD, read
from bot.store import scans, slots

#: Findings whose evidence is read, at most, per scan (the worst first).
EVIDENCE_LIMIT = 200
_log = logs.logger("evidence")


#: What the scan itself shows of a finding's owner (`bot.evidence.deadlock.RedissonLocks.owner`):
#: (owner_alive, owner_evidence), or None when it says nothing of that finding.
Owners = Callable[[Finding], "tuple[bool | None, str] | None"]


def rank(
    client: redis.Redis, findings: Sequence[Finding], owners: Owners | None = None
) -> list[Finding]:
    """`findings` (a scan's kept list) with each finding's `impact`, the findings ordered by score
    (highest first) and the other kept keys (healthy, not a lock) after them as they were. Only
    the first EVIDENCE_LIMIT findings are read; a Redis error leaves every impact unknown.
    `owners` adds what the scan showed of an owner (a Redisson instance renewing another lock)."""
    flagged = [f for f in findings if f.reason in FINDING_REASONS]
    others = [f for f in findings if f.reason not in FINDING_REASONS]
    examined, beyond = flagged[:EVIDENCE_LIMIT], flagged[EVIDENCE_LIMIT:]
    started = time.monotonic()
    reader: Callable[[Any, Sequence[Finding]], list[Impact]] = (
        read_cluster if slots.is_cluster(client) else read
    )
    try:
        impacts = reader(client, examined) if examined else []
    except redis.RedisError as exc:
        logs.event(
            _log,
            "evidence_failed",
            logging.WARNING,
            error=type(exc).__name__,
            findings=len(examined),
        )
        impacts = [_unknown(f, f"not read ({type(exc).__name__})") for f in examined]
    note = f"not read: only the {EVIDENCE_LIMIT} worst findings are examined"
    impacts += [_unknown(f, note) for f in beyond]
    if owners is not None:
        impacts = [_owned(f, i, owners(f)) for f, i in zip(flagged, impacts, strict=True)]
    ranked = [replace(f, impact=_said(f, i)) for f, i in zip(flagged, impacts, strict=True)]
    ranked.sort(key=lambda f: f.impact.score if f.impact else 0.0, reverse=True)
    if examined:
        logs.event(
            _log,
            "evidence_read",
            logging.DEBUG,
            findings=len(examined),
            blocking=sum(1 for f in ranked if f.impact is not None and f.impact.blocking),
            duration_ms=round((time.monotonic() - started) * 1000, 1),
        )
    return ranked + others


def record_ranked(client: redis.Redis, ranked: list[Finding], at_ms: int) -> None:
    """Keep the worst of `ranked` (`rank`'s order) in the last-scan record the scan at `at_ms`
    committed (`bot.store.scans.record_worst`; a narrowed scan committed none, so it changes
    nothing). A Redis error is logged and the scan goes on: the record then lists no worst
    findings, as a record from before they were kept."""
    try:
        scans.record_worst(client, at_ms, ranked)
    except redis.RedisError as exc:
        logs.event(_log, "worst_not_recorded", logging.WARNING, error=type(exc).__name__)


def unknown_owner(f: Finding) -> str:
    """`owner_evidence` where lockguard has no way to tell whether the owner is alive (no
    liveness source for the layout): one short sentence, the same in JSON, the CLI and Slack."""
    return f"lockguard cannot tell for {f.layout.value} locks"


def _said(f: Finding, impact: Impact) -> Impact:
    """`impact`, its unknown owner said in words when the reader had nothing to say."""
    if impact.owner_alive is None and not impact.owner_evidence:
        return replace(impact, owner_evidence=unknown_owner(f))
    return impact


def _owned(f: Finding, i: Impact, owner: tuple[bool | None, str] | None) -> Impact:
    """`i` with the owner fact: alive replaces the sentence; unknown replaces only the default
    one (a sentence saying a read failed stays)."""
    if owner is None or (owner[0] is None and i.owner_evidence not in ("", NO_RECORD)):
        return i
    alive, said = owner
    return scored(
        f.reason,
        f.held_seconds,
        waiters=i.waiters,
        woken=i.woken,
        backlog=i.backlog,
        owner_alive=alive,
        owner_evidence=said,
    )


def _unknown(f: Finding, why: str) -> Impact:
    return scored(f.reason, f.held_seconds, owner_evidence=why)
