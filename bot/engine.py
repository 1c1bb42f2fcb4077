"""The Engine: the one object every entry point (CLI, Slack, scheduler, webhook) calls.

It turns every Redis failure into a `LockguardError` naming the endpoint (never a secret), and
knows nothing of Slack, HTTP or the terminal: callers render what it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import redis

from bot.cases import approval, audit, decision, opening, release_lease
from bot.cases.approval import ApprovalReport, Progress
from bot.cases.audit import AuditEntry
from bot.cases.case import Case, CaseLock, check_case_id
from bot.cases.case_store import CaseStore
from bot.cases.reclaim_config import ReclaimConfig
from bot.core import globs
from bot.core.display import escape
from bot.core.errors import ConfigError
from bot.core.model import Finding
from bot.scan import ReadMode
from bot.scan.result import ScanOptions, ScanResult
from bot.store import keyspace, migration, scans
from bot.store.connection import redis_errors
from bot.store.door import Door
from bot.store.patterns import parse_patterns

TRIGGERS = ("cli", "slash", "schedule", "webhook")


@dataclass(frozen=True, slots=True)
class Status:
    """What `lockguard check` and `/lockguard status` show."""

    endpoint: str
    redis_version: str
    server_time_ms: int
    last_scan: dict[str, Any] | None
    heartbeat_alive: bool
    #: Some `lockguard serve` holds the leader lease: scheduled scans are expected.
    serving: bool = False


class Engine:
    def __init__(
        self,
        client: redis.Redis,
        options: ScanOptions,
        config: ReclaimConfig,
        *,
        endpoint: str = "",
        secrets: tuple[str, ...] = (),
        auto_remediate: bool = True,
    ) -> None:
        self.client = client
        self.options = options
        # What a release may touch is what this engine is configured to scan: one source.
        self.config = replace(config, patterns=tuple(options.patterns))
        self.endpoint = endpoint or options.endpoint or "Redis"
        self.secrets = secrets
        #: The door to Redis for the state of the layers above (`bot.store.door`).
        self.door = Door(client, self.endpoint, secrets)
        self.auto_remediate = auto_remediate
        self._keyspace_ready = False

    @contextmanager
    def _redis(self, *, migrate: bool = True) -> Iterator[None]:
        """Redis failures as LockguardErrors; before the first call that writes, the keyspace
        migration (`bot.store.migration`: one GET once it has run)."""
        with redis_errors(self.endpoint, self.secrets):
            if migrate and not self._keyspace_ready:
                migration.ensure(self.client)
                self._keyspace_ready = True
            yield

    def narrow(self, pattern: str) -> list[bytes]:
        """The patterns of `/lockguard scan PATTERN` (`narrowed`). Pure: callable before an ack."""
        return narrowed(pattern, self.options.patterns)

    def scan(
        self,
        trigger: str = "cli",
        *,
        pattern: str | None = None,
        mode: ReadMode | None = None,
        keep: int = 50,
        on_finding: Callable[[Finding], None] | None = None,
        propose: bool | None = None,
        by: str = "",
    ) -> tuple[ScanResult, Case | None]:
        """One scan, and (auto-remediation on, or `propose`) one case of the releasable findings
        not already in a live case nor rejected. A `pattern`-narrowed scan keeps the tenure
        history of every lock it does not cover; `by` is who asked (a Slack user id)."""
        if trigger not in TRIGGERS:
            raise ConfigError(
                f"unknown scan trigger {trigger!r}: expected one of {', '.join(TRIGGERS)}"
            )
        options = replace(self.options, trigger=trigger, endpoint=self.endpoint, requested_by=by)
        if pattern is not None:
            wanted = self.narrow(pattern)
            if set(wanted) != set(self.options.patterns):
                options = replace(options, patterns=wanted, narrowed=True)
        if mode is not None:
            options = replace(options, mode=mode)
        with self._redis():
            return opening.scan_and_propose(
                self.client,
                options,
                self.config,
                propose=self.auto_remediate if propose is None else propose,
                on_finding=on_finding,
                keep=keep,
            )

    def approve(
        self, case_id: str, actor: str, *, resume: bool = False, progress: Progress | None = None
    ) -> ApprovalReport:
        with self._redis():
            return approval.approve(
                self.client, case_id, actor, self.config, resume=resume, progress=progress
            )

    def reject(self, case_id: str, actor: str, reason: str) -> Case:
        with self._redis():
            return decision.reject(self.client, case_id, actor, reason, self.config)

    def case(self, case_id: str) -> Case:
        with self._redis():
            return decision.get_case(self.client, case_id, self.config)

    def case_lock_batches(self, case_id: str) -> Iterator[list[CaseLock]]:
        """Every lock of the case in scan order, a batch at a time: memory stays flat."""
        batches = CaseStore(self.client, retention_ms=self.config.retention_ms).locks(
            check_case_id(case_id)
        )
        while True:
            with self._redis():
                batch = next(batches, None)
            if batch is None:
                return
            yield [lock for _, lock in batch]

    def cases(self, limit: int = 20) -> list[Case]:
        with self._redis():
            return CaseStore(self.client, retention_ms=self.config.retention_ms).recent(limit)

    def release_leases(self, case_ids: list[str]) -> dict[str, str]:
        """Each case -> whether some process is releasing it now (`bot.cases.release_lease`)."""
        with self._redis():
            return release_lease.lease_states(self.client, case_ids)

    def audit(self, limit: int = 50, case_id: str | None = None) -> list[AuditEntry]:
        with self._redis():
            return audit.recent(self.client, limit, case_id)

    def now_ms(self) -> int:
        with self._redis():
            return scans.server_ms(self.client)

    def status(self) -> Status:
        """Read-only (`lockguard check`): it does not migrate the keyspace."""
        with self._redis(migrate=False):
            self.client.ping()
            try:
                version = str(self.client.info("server").get("redis_version", "?"))
            except redis.ResponseError:  # INFO renamed or refused: the rest still answers
                version = "?"
            return Status(
                endpoint=self.endpoint,
                redis_version=version,
                server_time_ms=scans.server_ms(self.client),
                last_scan=scans.last_scan(self.client),
                heartbeat_alive=bool(self.client.exists(keyspace.HEARTBEAT)),
                serving=bool(self.client.exists(keyspace.LEADER)),
            )


#: What a slash command or a webhook body may ask a scan for: at most this many comma-separated
#: patterns, of at most this many characters in all and this many wildcards (`*`, `?`, `[`) each.
MAX_NARROW_PATTERNS = 8
MAX_NARROW_TEXT = 512
MAX_NARROW_WILDCARDS = 16


def narrowed(pattern: str, configured: Sequence[bytes]) -> list[bytes]:
    """`pattern`'s comma-separated patterns, each narrowing one of `configured`: a scan may look
    at less than `LOCKGUARD_LOCK_PATTERNS`, never at more. A ConfigError names the configured
    patterns (callers tell it only to people who may scan)."""
    if len(pattern) > MAX_NARROW_TEXT:
        raise ConfigError(
            f"pattern: {len(pattern)} characters; at most {MAX_NARROW_TEXT} are accepted"
        )
    try:
        wanted = parse_patterns(pattern)
    except ValueError as exc:
        raise ConfigError(f"pattern: {exc}") from None
    if len(wanted) > MAX_NARROW_PATTERNS:
        raise ConfigError(
            f"pattern: {len(wanted)} patterns; at most {MAX_NARROW_PATTERNS} are accepted"
        )
    for p in wanted:
        wild = sum(p.count(c) for c in (b"*", b"?", b"["))
        if wild > MAX_NARROW_WILDCARDS:
            raise ConfigError(
                f"pattern {escape(p, 120)} has {wild} wildcards; at most "
                f"{MAX_NARROW_WILDCARDS} are accepted"
            )
    outside = [p for p in wanted if globs.narrowing(p, configured) is None]
    if outside:
        raise ConfigError(
            f"pattern {escape(outside[0], 120)} is not within the configured lock patterns "
            f"(LOCKGUARD_LOCK_PATTERNS: {_listed(configured)}); a scan may only narrow them"
        )
    return wanted


def _listed(patterns: Sequence[bytes]) -> str:
    return ", ".join(escape(p, 120) for p in patterns[:10]) + (" …" if len(patterns) > 10 else "")
