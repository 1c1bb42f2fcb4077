"""How cases are opened, decided and released, from the settings (`Settings.reclaim_config`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.core.pacing import DEFAULT_BUDGET
from bot.core.rules import Policy


@dataclass(frozen=True, slots=True)
class ReclaimConfig:
    dry_run: bool = True
    publish_release_event: bool = True
    release_channel: str = "locks:reclaimed"
    case_ttl_ms: int = 3_600_000
    lock_delay_ms: int = 0  # 0: delete; >0: shorten the TTL to this instead (lock-delay)
    retention_ms: int = 30 * 86_400_000
    reject_snooze_ms: int = 86_400_000  # a rejected lock is not proposed again for this long
    required_approvals: int = 1  # 2: two distinct people must approve before anything is released
    #: How a lock is judged again before release: the same policy the scans use.
    policy: Policy = field(default_factory=lambda: Policy(stale_threshold_ms=900_000))
    #: `LOCKGUARD_LOCK_PATTERNS`: a case lock no pattern matches is never touched (`recheck`).
    patterns: tuple[bytes, ...] = (b"lock:*",)
    #: `LOCKGUARD_SCAN_BUDGET`: the share of Redis's time the release scripts may use.
    budget: float = DEFAULT_BUDGET
