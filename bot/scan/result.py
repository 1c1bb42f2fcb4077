"""What a scan is asked to do (`ScanOptions`) and what it found (`ScanResult`): counts, the worst
and the oldest locks, the age histogram, and the summary that is stored and audited."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.core.display import escape, key_ref
from bot.core.model import FINDING_REASONS, Finding, Layout, Reason
from bot.core.pacing import DEFAULT_BUDGET, UNPACED
from bot.core.rules import Policy
from bot.scan import ReadMode, ScanStats
from bot.scan.types import MAX_KEY_BYTES

#: A scan's wait for its budget is said from this many seconds on (shorter, nobody notices).
PACED_SAID_FROM = 0.5

#: Age buckets of the scan's histogram (digests): under 1 min, 15 min, 1 h, 6 h, 1 d, 7 d, older.
AGE_BOUNDS = (60.0, 900.0, 3600.0, 21600.0, 86400.0, 604800.0)
AGE_LABELS = ("<1m", "<15m", "<1h", "<6h", "<1d", "<7d", ">=7d")
#: How many of the oldest locks a scan keeps (whatever their verdict).
OLDEST_KEPT = 10
#: How many `not_a_lock` keys a scan keeps, with why each is not a lock (`scan --json` lists them).
NOT_A_LOCK_KEPT = 100


@dataclass(frozen=True, slots=True)
class ScanOptions:
    patterns: Sequence[bytes]
    policy: Policy
    scan_count: int = 1000
    #: `LOCKGUARD_SCAN_BUDGET`: the share of Redis's time the scan may use (1: unpaced).
    budget: float = DEFAULT_BUDGET
    mode: ReadMode = ReadMode.AUTO
    trigger: str = "cli"  # who asked: cli, slash, schedule, webhook (logs and metrics)
    endpoint: str = ""  # where Redis is, for logs: never a password
    #: `patterns` narrow the configured ones: only the history of what it covered is updated.
    narrowed: bool = False
    #: Who asked, for messages and the scan lease ("U012AB3CD" for a slash scan), else "".
    requested_by: str = ""


_MARK_PREFIX = {r: r.value.encode() + b"\0" for r in Reason}


def flagged_mark(key: bytes, reason: Reason, _blake2b: Any = hashlib.blake2b) -> int:
    """One flagged lock's part of `ScanResult.flagged_digest` (stable across processes)."""
    return int.from_bytes(_blake2b(_MARK_PREFIX[reason] + key, digest_size=8).digest(), "big")


@dataclass(slots=True)
class ScanResult:
    scanned: int = 0
    by_reason: Counter[Reason] = field(default_factory=Counter)
    by_layout: Counter[Layout] = field(default_factory=Counter)
    worst: list[Finding] = field(default_factory=list)  # worst and oldest first, at most `keep`
    oldest_held_seconds: float = 0.0
    server_time_ms: int = 0
    duration_seconds: float = 0.0
    mode: str = ""
    #: The budget the scan was paced to (1: unpaced) and how long it waited for it, in all.
    budget: float = UNPACED
    waited_seconds: float = 0.0
    stats: ScanStats = field(default_factory=ScanStats)
    #: What proposing did with the releasable findings (set by `bot.cases.opening`), else empty.
    proposal: dict[str, object] = field(default_factory=dict)
    #: What the deadlock check covered (set by `bot.cases.deadlocks`), else empty.
    deadlocks: dict[str, object] = field(default_factory=dict)
    #: Keys read per pattern (a key two patterns match counts under the first).
    by_pattern: Counter[bytes] = field(default_factory=Counter)
    #: The OLDEST locks whatever their verdict (healthy ones too: digests age them), oldest first.
    oldest: list[Finding] = field(default_factory=list)
    #: Locks (not `not_a_lock`) per age bucket: under each of AGE_BOUNDS seconds, then older.
    age_histogram: list[int] = field(default_factory=lambda: [0] * (len(AGE_BOUNDS) + 1))
    #: The first NOT_A_LOCK_KEPT `not_a_lock` keys met, in scan order (`note` says why each).
    not_locks: list[Finding] = field(default_factory=list)
    #: What was scanned and for whom (messages name them).
    patterns: list[bytes] = field(default_factory=list)
    narrowed: bool = False
    trigger: str = ""
    requested_by: str = ""
    #: Every flagged lock and its reason as one order-free number (`flagged_mark`s summed mod
    #: 2**64): the same flagged locks give the same digest, however many `worst` keeps.
    flagged_digest: int = 0

    def reclassify(self, key: bytes, old: Reason, new: Reason) -> None:
        """The lock `key`, counted as `old`, counted as `new` instead (`by_reason`, the digest)."""
        self.by_reason[old] -= 1
        self.by_reason[new] += 1
        digest = self.flagged_digest
        if old in FINDING_REASONS:
            digest -= flagged_mark(key, old)
        if new in FINDING_REASONS:
            digest += flagged_mark(key, new)
        self.flagged_digest = digest & 0xFFFF_FFFF_FFFF_FFFF

    @property
    def findings(self) -> int:
        return sum(n for r, n in self.by_reason.items() if r in FINDING_REASONS)

    @property
    def paced(self) -> dict[str, float]:
        """The budget, the seconds waited for it, and their share of the scan's time."""
        fraction = self.waited_seconds / self.duration_seconds if self.duration_seconds else 0.0
        return {
            "budget": self.budget,
            "waited_seconds": round(self.waited_seconds, 3),
            "fraction": round(min(fraction, 1.0), 3),
        }

    def oversized_words(self) -> str:
        """`2 key(s) over 4096 bytes ...` naming the first by prefix, or ""."""
        n = self.stats.oversized
        if not n:
            return ""
        named = ", ".join(
            f"{escape(p, 48)}…({size:,} bytes)" for p, size in self.stats.oversized_keys[:3]
        )
        read = len(self.stats.oversized_read)
        how = (
            f"{read} read in Redis by their first and last bytes, never whole"
            if read
            else "not read"
        )
        return f"{n} key(s) over {MAX_KEY_BYTES} bytes ({how}): {named}" + (" …" if n > 3 else "")

    def paced_words(self) -> str:
        """`paced: waited 1.2 s of 10.0 s ...`, or "" under `PACED_SAID_FROM` s (no news)."""
        if self.waited_seconds < PACED_SAID_FROM:
            return ""
        share = self.paced["fraction"] * 100
        return (
            f"paced: waited {self.waited_seconds:.1f} s of {self.duration_seconds:.1f} s "
            f"({share:.0f}%) so that lockguard used at most {self.budget:g} of Redis's time "
            "(LOCKGUARD_SCAN_BUDGET)"
        )

    def summary(self) -> dict[str, object]:
        return {
            "scanned": self.scanned,
            "finding_count": self.findings,
            "by_reason": {r.value: self.by_reason.get(r, 0) for r in Reason},
            "by_layout": {k.value: v for k, v in sorted(self.by_layout.items())},
            "oldest_held_seconds": round(self.oldest_held_seconds, 3),
            "server_time_ms": self.server_time_ms,
            "duration_seconds": round(self.duration_seconds, 3),
            "read_mode": self.mode,
            "paced": self.paced,
            "duplicates_skipped": self.stats.duplicates,
            "vanished_mid_scan": self.stats.vanished,
            "oversized_keys": self.stats.oversized,
            "oversized": [
                {"key_prefix": escape(p, None), "key_bytes": n}
                for p, n in self.stats.oversized_keys
            ],
            "by_pattern": {escape(p): n for p, n in self.by_pattern.items()},
            "age_histogram": dict(zip(AGE_LABELS, self.age_histogram, strict=True)),
            "oldest": [
                {
                    **key_ref(f.key, f.big),
                    "layout": f.layout.value,
                    "reason": f.reason.value,
                    "owner": f.owner,
                    "held_seconds": round(f.held_seconds, 3),
                    "ttl_ms": f.ttl_ms,
                }
                for f in self.oldest
            ],
            "patterns": [escape(p) for p in self.patterns],
            "narrowed": self.narrowed,
            **({"proposal": self.proposal} if self.proposal else {}),
            **({"deadlocks": self.deadlocks} if self.deadlocks else {}),
        }
