"""One scan: the steps behind `Engine.scan`.

Batches are read, counted (`bot.scan.tally`), their tenure records written back
(`bot.store.scans`) and findings handed on as they come: memory stays flat, one batch at a time
plus the `keep` worst locks. Each server's reads are paced to the scan budget; the scan lease is
renewed between waits too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from contextlib import suppress

import redis

from bot.core import logs, pacing
from bot.core.model import Finding, Reason, Snapshot
from bot.core.pacing import Pacer, parse_budget
from bot.scan import Batch, ReadMode, Scanner
from bot.scan.cluster_scanner import ClusterScanner
from bot.scan.result import ScanOptions, ScanResult
from bot.scan.tally import RedissonSeen, Tally
from bot.store import keyspace, scans, slots

REFRESH_EVERY_S = 10.0
#: Tenure records a scan of one server collects before writing them in one round trip: batches
#: are small, a write per batch would cost a round trip each.
WRITE_EVERY = 1000
_log = logs.logger("scan")
Write = Callable[[dict[bytes, bytes]], None]


def run_scan(
    client: redis.Redis,
    options: ScanOptions,
    *,
    on_finding: Callable[[Finding], None] | None = None,
    keep: int = 50,
    before_commit: Callable[[ScanResult], None] | None = None,
    on_redisson: RedissonSeen | None = None,
) -> ScanResult:
    """One full scan. `on_finding` sees every flagged lock as it is found; the result keeps
    counts and the `keep` worst keys. `before_commit` runs after the last batch: if it fails, the
    scan is not recorded as done. However the scan ends, the scan lease is given back."""
    started = time.monotonic()
    result = ScanResult(
        patterns=list(options.patterns),
        narrowed=options.narrowed,
        trigger=options.trigger,
        requested_by=options.requested_by,
    )
    result.budget = parse_budget(options.budget)  # a bad one refused before anything is taken
    token, gen = scans.begin_scan(client, scans.scan_holder(options.trigger, options.requested_by))
    lease = _LeaseKeeper(client, token)
    pacers: list[Pacer] = []

    def pacer() -> Pacer:  # one per server scanned: each is paced on its own server time
        pacers.append(Pacer(options.budget, sleep=lease.sleep))
        return pacers[-1]

    try:
        tally = Tally(result, options.policy, keep, on_finding, on_redisson)
        scanner = _count_all(client, options, gen, tally, lease, pacer)
        result.waited_seconds = sum(p.waited_s for p in pacers)
        _finish(client, result, scanner, tally, started)
        if before_commit is not None:
            before_commit(result)
        if options.narrowed:
            scans.commit_narrowed(client, token, gen)
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
    _completed(options, result)
    return result


def _finish(
    client: redis.Redis,
    result: ScanResult,
    scanner: Scanner | ClusterScanner,
    tally: Tally,
    started: float,
) -> None:
    """The result once the last batch is counted (before the commit: the summary lists them)."""
    result.stats = scanner.stats
    result.mode = scanner.mode.value  # again: a refused first Lua batch falls back
    result.duration_seconds = time.monotonic() - started
    if not result.server_time_ms:
        result.server_time_ms = scans.server_ms(client)
    result.oldest = tally.aged.items()
    result.worst = tally.worst.items()


class _LeaseKeeper:
    """Renews the scan lease every REFRESH_EVERY_S: after each batch and each wait for the
    budget (a paced scan may read many empty batches in a row)."""

    def __init__(self, client: redis.Redis, token: bytes) -> None:
        self.client, self.token = client, token
        self.last = time.monotonic()

    def keep(self) -> None:
        if time.monotonic() - self.last > REFRESH_EVERY_S:
            scans.refresh_scan(self.client, self.token)
            self.last = time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
        self.keep()


def _count_all(
    client: redis.Redis,
    options: ScanOptions,
    gen: int,
    tally: Tally,
    lease: _LeaseKeeper,
    pacer: Callable[[], Pacer],
) -> Scanner | ClusterScanner:
    """Every batch read, counted and its records written; the scanner, for its counters."""
    scanner, batches, write = _reader(client, options, gen, pacer)
    tally.result.mode = scanner.mode.value
    pending: dict[bytes, bytes] = {}  # records not yet written (Lua mode, one server)
    try:
        for batch in batches:  # the scanner reads the next batch while this one is counted
            records = tally.add(batch, scanner.stats.pattern)
            if isinstance(scanner, Scanner) and scanner.mode is ReadMode.LUA:
                scanner.deferred = True  # small batches: written WRITE_EVERY records at a time
                pending.update(records)
                if len(pending) >= WRITE_EVERY:
                    _write_behind(scanner, keyspace.tenure_table(gen + 1), pending, write)
                    pending = {}
                    scanner.written()
            else:
                write(records)
            lease.keep()
        if isinstance(scanner, Scanner) and scanner.stats.oversized_read:
            pending.update(_oversized(client, gen, tally, scanner.stats.oversized_read))
        if pending:
            write(pending)
    finally:
        batches.close()  # gives the scanner's connection back, even when a step failed
    return scanner


def _oversized(
    client: redis.Redis, gen: int, tally: Tally, read: dict[bytes, tuple[Snapshot, bytes]]
) -> dict[bytes, bytes]:
    """The oversized keys the batches read, counted as any lock is; their tenure records (under
    their `BigKey.name`) to write."""
    found = list(read.values())
    prev = client.hmget(keyspace.tenure_table(gen), [snap.key for snap, _ in found])
    records: dict[bytes, bytes] = {}
    for (snap, pattern), record in zip(found, prev, strict=True):
        records.update(tally.add([(snap, record if isinstance(record, bytes) else None)], pattern))
    return records


def _write_behind(
    scanner: Scanner, table: bytes, records: dict[bytes, bytes], write: Write
) -> None:
    """`records` sent behind the call in flight, without waiting, their server time counted for
    the budget; written by `write` without a reader."""
    reader = scanner.reader
    commands = scans.tenure_writes(table, records)
    if reader is None or not reader.write(commands):
        write(records)
    elif scanner.pacer is not None:
        scanner.pacer.count(pacing.hset_cost(len(records), len(commands)))


def _completed(options: ScanOptions, result: ScanResult) -> None:
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


def _reader(
    client: redis.Redis, options: ScanOptions, gen: int, pacer: Callable[[], Pacer]
) -> tuple[Scanner | ClusterScanner, Generator[Batch, None, None], Write]:
    """The scanner for this Redis, its batches, and how a batch's tenure records are written
    (into generation `gen + 1`); each server is paced by a `pacer()` of its own."""
    if slots.is_cluster(client):
        cluster = ClusterScanner(
            client,  # type: ignore[arg-type]
            gen,
            count=options.scan_count,
            mode=options.mode,
            pacer=pacer,
        )
        return cluster, cluster.batches(options.patterns), cluster.write_tenures
    paced = pacer()
    scanner = Scanner(client, count=options.scan_count, mode=options.mode, pacer=paced)
    batches = scanner.batches(
        options.patterns, keyspace.tenure_table(gen), keyspace.tenure_table(gen + 1)
    )

    def write(records: dict[bytes, bytes]) -> None:
        started = time.perf_counter()
        scans.write_tenures(client, gen + 1, records)
        paced.pause(time.perf_counter() - started)  # its round trip: an upper bound

    return scanner, batches, write
