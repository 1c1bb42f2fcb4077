"""The scan's hot loop: each lock recognised, its tenure continued, its verdict decided and
counted, and kept as a `Finding` only when the report or `on_finding` needs it."""

from __future__ import annotations

from bisect import bisect
from collections.abc import Callable

from bot.core import renewal, tenures
from bot.core.layouts import recognize
from bot.core.model import SEVERITY, Finding, Layout, Reason, Recognized, Snapshot, Tenure
from bot.core.rules import Policy, classify, releasable
from bot.core.worst import Worst
from bot.scan import Batch
from bot.scan.result import AGE_BOUNDS, NOT_A_LOCK_KEPT, OLDEST_KEPT, ScanResult, flagged_mark

#: Sees every Redisson lock of the scan (`bot.evidence.deadlock`).
RedissonSeen = Callable[[Snapshot, Recognized, Tenure, Reason], None]


class Tally:
    """Everything a scan learns, batch by batch, into its `ScanResult`; `worst` keeps the `keep`
    worst locks and `aged` the oldest."""

    def __init__(
        self,
        result: ScanResult,
        policy: Policy,
        keep: int,
        on_finding: Callable[[Finding], None] | None,
        on_redisson: RedissonSeen | None = None,
    ) -> None:
        self.result = result
        self.policy = policy
        self.on_finding = on_finding
        self.on_redisson = on_redisson
        self.worst: Worst[Finding] = Worst(keep)
        self.aged: Worst[Finding] = Worst(OLDEST_KEPT)
        self._aged_floor = -1.0  # below any age: the oldest list is not full yet

    def add(self, batch: Batch, pattern: bytes) -> dict[bytes, bytes]:
        """Count one batch; returns its tenure records, to be written back."""
        result, policy, on_finding = self.result, self.policy, self.on_finding
        result.by_pattern[pattern] += len(batch)
        records: dict[bytes, bytes] = {}
        # This runs once per lock (millions per scan): names are bound locally, and a lock that
        # would not make the kept list (and that no `on_finding` needs to see) costs no Finding.
        recognize_, advance = recognize, tenures.advance
        classify_, reasons, layouts = classify, [], []  # counted once per batch
        healthy, worst_floor, keep = Reason.HEALTHY, self.worst.floor, self._keep
        floor = worst_floor()  # the rank a lock needs to be kept (None: any)
        not_a_lock, loose = Reason.NOT_A_LOCK, policy.loose_recognition
        oldest, aged_floor = result.oldest_held_seconds, self._aged_floor
        bounds, hist, severity = AGE_BOUNDS, result.age_histogram, SEVERITY
        not_locks, flagged_sum = result.not_locks, result.flagged_digest
        redisson, on_redisson = Layout.REDISSON, self.on_redisson
        for snap, prev_record in batch:
            rec = recognize_(snap, loose)
            tenure, records[snap.key] = advance(prev_record, snap, rec)
            now, layout = snap.observed_ms, rec.layout
            listed = False
            if rec.not_a_lock:
                reason = not_a_lock
                listed = len(not_locks) < NOT_A_LOCK_KEPT
            else:
                reason = classify_(tenure, snap.pttl_ms, layout, now, policy)
            reasons.append(reason)
            layouts.append(layout)
            if layout is redisson and on_redisson is not None:
                on_redisson(snap, rec, tenure, reason)
            held = (now - tenure.first_seen_ms) / 1000
            aging = False
            if reason is not not_a_lock:
                if held > oldest:
                    oldest = held
                hist[bisect(bounds, held)] += 1
                aging = held >= aged_floor
            flagged = reason is not healthy and reason is not not_a_lock
            if flagged:  # few locks: the digest the announcer tells repeats by
                flagged_sum += flagged_mark(snap.key, reason)
            tell = flagged and on_finding is not None
            rank = (-severity[reason], held)
            kept = floor is None or rank >= floor  # Worst.admits, inline
            if kept or tell or aging or listed:  # else only counted: no Finding is built
                aged_floor = keep(snap, rec, tenure, reason, rank, (kept, tell, aging, listed))
                floor = worst_floor()
        self._aged_floor = aged_floor
        result.flagged_digest = flagged_sum & 0xFFFF_FFFF_FFFF_FFFF
        result.by_reason.update(reasons)
        result.by_layout.update(layouts)
        result.scanned += len(batch)
        if batch:  # the pipeline read yields empty batches (all repeats or gone)
            result.server_time_ms = batch[-1][0].observed_ms
        result.oldest_held_seconds = oldest
        return records

    def _keep(
        self,
        snap: Snapshot,
        rec: Recognized,
        tenure: Tenure,
        reason: Reason,
        rank: tuple[int, float],
        wanted: tuple[bool, bool, bool, bool],
    ) -> float:
        """The lock as a `Finding`, told, kept and listed as `wanted` says; returns the age an
        oldest lock now has to beat."""
        kept, tell, aging, listed = wanted
        held, now, layout = rank[1], snap.observed_ms, rec.layout
        partial = snap.hash_len > len(snap.fields)
        offer, note = releasable(
            reason, layout, now - tenure.first_seen_ms, self.policy, partial=partial
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
            observations=tenure.observations,
            rearms=tenure.rearms,
            counter=rec.counter,
            observed_ms=now,
            fields=snap.fields,
            partial=partial,
            releasable=offer,
            note=rec.not_a_lock or note,
            renewal=renewal.said(layout, tenure, snap.pttl_ms, now, reason),
            big=snap.big,
        )
        if tell:
            self.on_finding(finding)  # type: ignore[misc]
        if kept:
            self.worst.add(rank, finding)
        if listed:
            self.result.not_locks.append(finding)
        if aging:
            self.aged.add((held,), finding)
            floor = self.aged.floor()
            self._aged_floor = -1.0 if floor is None else floor[0]
        return self._aged_floor
