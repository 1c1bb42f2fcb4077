"""A scan's findings with their `Impact`, highest score first; `record_ranked` keeps the worst in
the last-scan record (digests, the Home tab)."""

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

#: Findings whose evidence is read, at most, per scan.
EVIDENCE_LIMIT = 200
_log = logs.logger("evidence")


#: What the scan showed of a finding's owner (`RedissonLocks.owner`), or None: nothing.
Owners = Callable[[Finding], "tuple[bool | None, str] | None"]


def rank(
    client: redis.Redis, findings: Sequence[Finding], owners: Owners | None = None
) -> list[Finding]:
    """The findings by score, then the other kept keys as they were. Only the first
    EVIDENCE_LIMIT are read; a Redis error leaves every impact unknown."""
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
    """A narrowed scan committed no record: nothing changes. A Redis error is logged and the
    scan goes on (the record then lists no worst findings)."""
    try:
        scans.record_worst(client, at_ms, ranked)
    except redis.RedisError as exc:
        logs.event(_log, "worst_not_recorded", logging.WARNING, error=type(exc).__name__)


def _said(f: Finding, impact: Impact) -> Impact:
    """An owner the reader said nothing of: a layout with no liveness source."""
    if impact.owner_alive is None and not impact.owner_evidence:
        return replace(impact, owner_evidence=f"lockguard cannot tell for {f.layout.value} locks")
    return impact


def _owned(f: Finding, i: Impact, owner: tuple[bool | None, str] | None) -> Impact:
    """Alive replaces the sentence; unknown only the default one (a failed read's stays)."""
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
