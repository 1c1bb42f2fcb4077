"""Opening a case: the scan tick every entry point runs (`scan_and_propose`), and a case of given
findings (`open_case`). No Slack, CLI or scheduler here: they call these and render the result.
Every case opened is logged and audited with its first locks.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace
from typing import Any

import redis

from bot.cases import audit
from bot.cases.case import Case
from bot.cases.case_store import save_manifest
from bot.cases.deadlocks import DeadlockStep
from bot.cases.proposal import Proposal
from bot.cases.reclaim_config import ReclaimConfig
from bot.core import logs
from bot.core.display import key_ref
from bot.core.model import Finding
from bot.evidence import rank, record_ranked
from bot.scan.loop import run_scan
from bot.scan.result import ScanOptions, ScanResult
from bot.store.scans import server_ms

_log = logs.logger("cases")


def scan_and_propose(
    client: redis.Redis,
    options: ScanOptions,
    cfg: ReclaimConfig,
    *,
    propose: bool = True,
    on_finding: Callable[[Finding], None] | None = None,
    keep: int = 50,
) -> tuple[ScanResult, Case | None]:
    """Scan, audit the summary, and (when `propose`) put every releasable finding not in a live
    case nor rejected into one new case."""
    proposal: Proposal | None = None
    if propose:
        proposal = Proposal(
            client,
            server_ms(client),
            case_ttl_ms=cfg.case_ttl_ms,
            retention_ms=cfg.retention_ms,
        )
    deadlocks = DeadlockStep(client, options.policy, keep, proposal, on_finding)
    try:
        result = run_scan(
            client,
            options,
            on_finding=deadlocks.seen,
            keep=keep,
            before_commit=deadlocks.before_commit,
            on_redisson=deadlocks.locks,
        )
        result.worst = rank(client, result.worst, deadlocks.locks.owner)  # impacts, worst first
        record_ranked(client, result.worst, result.server_time_ms)  # digests, the Home tab
    except BaseException:
        if proposal is not None:
            with suppress(redis.RedisError):  # else the opening case lapses by itself
                proposal.abandon()
        raise
    case = proposal.finish() if proposal is not None else None
    if proposal is not None:
        result.proposal = proposal.summary()
        if proposal.digests:  # the findings name the oversized keys as the case does
            got = proposal.digests
            result.worst = [replace(f, big=got.get(f.key, f.big)) for f in result.worst]
    audit.append(
        client,
        event="scan",
        at_ms=result.server_time_ms,
        retention_ms=cfg.retention_ms,
        data=result.summary(),
    )
    if case is not None:
        _announce_case(client, case, cfg, proposal.summary())  # type: ignore[union-attr]
    return result, case


def open_case(
    client: redis.Redis, findings: list[Finding], cfg: ReclaimConfig, now_ms: int | None = None
) -> Case | None:
    """A pending case of the releasable findings not in a live case nor rejected, or None."""
    now = server_ms(client) if now_ms is None else now_ms
    proposal = Proposal(client, now, case_ttl_ms=cfg.case_ttl_ms, retention_ms=cfg.retention_ms)
    for f in sorted(findings, key=Finding.sort_key):
        proposal.add(f)
    case = proposal.finish()
    if case is not None:
        _announce_case(client, case, cfg, proposal.summary())
    return case


def _announce_case(
    client: redis.Redis, case: Case, cfg: ReclaimConfig, summary: dict[str, Any]
) -> None:
    save_manifest(client, case, summary, cfg.retention_ms)
    logs.event(
        _log,
        "case_opened",
        case_id=case.id,
        expires_ms=case.expires_ms,
        **{"locks": case.lock_count, **summary},
    )
    audit.append(
        client,
        event="case_opened",
        at_ms=case.created_ms,
        retention_ms=cfg.retention_ms,
        case_id=case.id,
        data={
            "lock_count": case.lock_count,
            **summary,
            "first_locks": [
                {**key_ref(lk.key, lk.big), "reason": lk.reason.value} for lk in case.locks[:20]
            ],
            "expires_ms": case.expires_ms,
        },
    )
