"""One scan: the sequence of steps behind `Engine.scan` (`bot.engine`).

A scan reads batches (`bot.scan`), continues each lock's lease (`bot.core.leases`), decides a
verdict
(`bot.core.rules`), writes the lease records back per batch (`bot.store.scans`) and hands each
finding to the
caller as it goes. Memory stays flat whatever the keyspace: one batch at a time, plus the `keep`
worst locks for the report.
"""

from __future__ import annotations

import time
from bisect import bisect
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field

import redis

from bot.core import leases, logs
from bot.core.display import escape, key_ref
from bot.core.layouts import recognize
from bot.core.model import FINDING_REASONS, SEVERITY, Finding, Layout, Reason
from bot.core.rules import Policy, classify, releasable
from bot.core.worst import Worst
from bot.scan import ReadMode, Scanner, ScanStats
from bot.scan.cluster import ClusterScanner
from bot.store import keyspace, scans, slots

REFRESH_EVERY_S = 10.0
#: Age buckets of the scan's histogram (digests): under 1 min, 15 min, 1 h, 6 h, 1 d, 7 d, older.
AGE_BOUNDS = (60.0, 900.0, 3600.0, 21600.0, 86400.0, 604800.0)
AGE_LABELS = ("<1m", "<15m", "<1h", "<6h", "<1d", "<7d", ">=7d")
#: How many of the oldest locks a scan keeps (whatever their verdict).
OLDEST_KEPT = 10
_log = logs.logger("scan")


@dataclass(frozen=True, slots=True)
class ScanOptions:
    patterns: Sequence[bytes]
    policy: Policy
    scan_count: int = 1000
    mode: ReadMode = ReadMode.AUTO
    trigger: str = "cli"  # who asked: cli, slash, schedule, webhook (logs and metrics)
    endpoint: str = ""  # where Redis is, for logs: never a password
    #: True when `patterns` narrow the configured ones (`Engine.scan(pattern=...)`): the scan
    #: then updates the history of what it covered and keeps everyone else's (`store`).
    narrowed: bool = False
    #: Who asked, for messages and the scan lease ("U012AB3CD" for a slash scan), else "".
    requested_by: str = ""


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
    stats: ScanStats = field(default_factory=ScanStats)
    #: What proposing did with the releasable findings (set by `bot.cases.reclaim`), else empty.
    proposal: dict[str, object] = field(default_factory=dict)
    #: Keys read per pattern (a key two patterns match counts under the first).
    by_pattern: Counter[bytes] = field(default_factory=Counter)
    #: The OLDEST locks whatever their verdict (healthy ones too: digests age them), oldest first.
    oldest: list[Finding] = field(default_factory=list)
    #: Locks (not `not_a_lock`) per age bucket: under each of AGE_BOUNDS seconds, then older.
    age_histogram: list[int] = field(default_factory=lambda: [0] * (len(AGE_BOUNDS) + 1))
    #: What was scanned and for whom (messages name them): the patterns, the trigger, who asked.
    patterns: list[bytes] = field(default_factory=list)
    narrowed: bool = False
    trigger: str = ""
    requested_by: str = ""

    @property
    def findings(self) -> int:
        return sum(n for r, n in self.by_reason.items() if r in FINDING_REASONS)

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
            "duplicates_skipped": self.stats.duplicates,
            "vanished_mid_scan": self.stats.vanished,
            "by_pattern": {escape(p): n for p, n in self.by_pattern.items()},
            "age_histogram": dict(zip(AGE_LABELS, self.age_histogram, strict=True)),
            "oldest": [
                {
                    **key_ref(f.key),
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
        }


def run_scan(
    client: redis.Redis,
    options: ScanOptions,
    *,
    on_finding: Callable[[Finding], None] | None = None,
    keep: int = 50,
    before_commit: Callable[[], None] | None = None,
) -> ScanResult:
    """One full scan. `on_finding` sees every lock whose reason is neither `healthy` nor
    `not_a_lock`, as it is found; the result keeps counts and the `keep` worst keys (healthy
    ones and not-a-lock keys included, last). `before_commit` runs after the last batch and
    before the scan is recorded: if it fails, the scan is not recorded as done."""
    started = time.monotonic()
    token, gen = scans.begin_scan(client, scans.scan_holder(options.trigger, options.requested_by))
    result = ScanResult(
        patterns=list(options.patterns),
        narrowed=options.narrowed,
        trigger=options.trigger,
        requested_by=options.requested_by,
    )
    worst: Worst[Finding] = Worst(keep)
    aged: Worst[Finding] = Worst(OLDEST_KEPT)
    policy = options.policy
    last_refresh = started
    try:
        scanner: Scanner | ClusterScanner
        if slots.is_cluster(client):
            scanner = ClusterScanner(
                client,  # type: ignore[arg-type]
                gen,
                count=options.scan_count,
                mode=options.mode,
            )
            batches = scanner.batches(options.patterns)
            write = scanner.write_leases
        else:
            scanner = Scanner(client, count=options.scan_count, mode=options.mode)
            batches = scanner.batches(
                options.patterns, keyspace.lease_table(gen), keyspace.lease_table(gen + 1)
            )

            def write(records: dict[bytes, bytes]) -> None:
                scans.write_leases(client, gen + 1, records)

        result.mode = scanner.mode.value
        # The loop below runs once per lock (millions per scan): names are bound locally, and a
        # lock that would not make the kept list (and that no `on_finding` needs to see) costs no
        # Finding. The scanner reads the next batch while this one is classified.
        recognize_, track, decode, encode = recognize, leases.track, leases.decode, leases.encode
        classify_, by_reason, by_layout = classify, result.by_reason, result.by_layout
        healthy, admits, add = Reason.HEALTHY, worst.admits, worst.add
        not_a_lock, loose = Reason.NOT_A_LOCK, policy.loose_recognition
        oldest = result.oldest_held_seconds
        aged_add, bounds, aged_floor = aged.add, AGE_BOUNDS, -1.0  # below any age: not yet full
        hist, by_pattern = result.age_histogram, result.by_pattern
        try:
            for batch in batches:
                by_pattern[scanner.stats.pattern] += len(batch)
                records: dict[bytes, bytes] = {}
                for snap, prev_record in batch:
                    rec = recognize_(snap, loose)
                    lease = track(decode(prev_record), snap, rec)
                    records[snap.key] = encode(lease)
                    now = snap.observed_ms
                    layout = rec.layout
                    if rec.not_a_lock:
                        reason = not_a_lock
                    else:
                        reason = classify_(lease, snap.pttl_ms, layout, now, policy)
                    by_reason[reason] += 1
                    by_layout[layout] += 1
                    held = (now - lease.first_seen_ms) / 1000
                    aging = False
                    if reason is not not_a_lock:
                        if held > oldest:
                            oldest = held
                        hist[bisect(bounds, held)] += 1
                        aging = held >= aged_floor
                    tell = (
                        reason is not healthy
                        and reason is not not_a_lock
                        and on_finding is not None
                    )
                    rank = (-SEVERITY[reason], held)
                    kept = admits(rank)
                    if not kept and not tell and not aging:
                        continue  # only counted: no Finding is built
                    partial = snap.hash_len > len(snap.fields)
                    offer, note = releasable(
                        reason, layout, now - lease.first_seen_ms, policy, partial=partial
                    )
                    finding = Finding(
                        key=snap.key,
                        type=snap.type,
                        layout=layout,
                        reason=reason,
                        identity=rec.identity,
                        owner=rec.owner,
                        ttl_ms=snap.pttl_ms,
                        held_seconds=held,
                        idle_seconds=snap.idle_s,
                        observations=lease.observations,
                        rearms=lease.rearms,
                        counter=rec.counter,
                        observed_ms=now,
                        fields=snap.fields,
                        partial=partial,
                        releasable=offer,
                        note=rec.not_a_lock or note,
                    )
                    if tell:
                        on_finding(finding)  # type: ignore[misc]
                    if kept:
                        add(rank, finding)
                    if aging:
                        aged_add((held,), finding)
                        floor = aged.floor()
                        aged_floor = -1.0 if floor is None else floor[0]
                result.scanned += len(batch)
                if batch:  # the pipeline read yields empty batches (all repeats or gone)
                    result.server_time_ms = batch[-1][0].observed_ms
                result.oldest_held_seconds = oldest
                write(records)
                if time.monotonic() - last_refresh > REFRESH_EVERY_S:
                    scans.refresh_scan(client, token)
                    last_refresh = time.monotonic()
        finally:
            batches.close()  # gives the scanner's connection back, even when a step failed
        result.stats = scanner.stats
        result.mode = scanner.mode.value  # again: a refused first Lua batch falls back
        result.duration_seconds = time.monotonic() - started
        if not result.server_time_ms:
            result.server_time_ms = scans.server_ms(client)
        result.oldest = aged.items()  # before the commit: the stored summary lists them
        if before_commit is not None:
            before_commit()
        if options.narrowed:
            scans.commit_narrowed(client, token, gen, result.server_time_ms)
        else:
            scans.commit_scan(client, token, gen, result.summary(), result.server_time_ms)
    except BaseException as exc:
        logs.event(
            _log,
            "scan_failed",
            trigger=options.trigger,
            redis=options.endpoint,
            error=type(exc).__name__,
            scanned=result.scanned,
        )
        with suppress(redis.RedisError):  # Redis went away mid-scan: the lease expires itself
            scans.abort_scan(client, token, gen)
        raise
    logs.event(
        _log,
        "scan_completed",
        trigger=options.trigger,
        redis=options.endpoint,
        scanned=result.scanned,
        findings=result.findings,
        not_a_lock=result.by_reason.get(Reason.NOT_A_LOCK, 0),
        duration_s=round(result.duration_seconds, 3),
        read_mode=result.mode,
        oldest_held_s=round(result.oldest_held_seconds, 1),
    )
    result.worst = worst.items()
    return result
