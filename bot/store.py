"""lockguard's own scan state in Redis: the scan lease, lease tables, last scan, heartbeat.

The keys are in `bot.keyspace`. Lease tables are generational so that leases of vanished locks are
dropped without holding the keyspace in memory: a scan writes every lock it sees into table N+1
(reading the previous lease from table N), and only a completed scan switches `gen` to N+1 and
unlinks table N, in one MULTI. A scan that dies half-way leaves N in force; the next scan clears
the partial N+1 first.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any, cast

import redis
from redis.typing import EncodableT

from bot import clock, lease_plan, slots
from bot.errors import ScanBusyError
from bot.keyspace import HEARTBEAT, LAST_SCAN, LEASE_GEN, SCAN_LEASE, lease_table

SCAN_LEASE_MS = 60_000
HEARTBEAT_MS = 15 * 60_000


def server_ms(client: redis.Redis) -> int:
    """The Redis server's clock (`TIME`) in ms: every age and timestamp lockguard records."""
    return time_ms(client.time())


def time_ms(reply: tuple[int, int]) -> int:
    """A `TIME` reply (seconds, microseconds), e.g. from a pipeline, in ms."""
    return clock.time_ms(*reply)


def current_gen(client: redis.Redis) -> int:
    """The lease-table generation in force (0 before the first completed scan)."""
    raw = client.get(LEASE_GEN)
    return int(raw) if isinstance(raw, bytes) and raw.isdigit() else 0


def begin_scan(client: redis.Redis) -> tuple[bytes, int]:
    """Take the scan lease and prepare the next lease table. Returns (lease token, current gen).
    (On a Redis Cluster the next generation's plan is made by `bot.scanner.cluster`.)"""
    token = secrets.token_hex(16).encode()
    if not client.set(SCAN_LEASE, token, nx=True, px=SCAN_LEASE_MS):
        raise ScanBusyError(
            "another lockguard scan is running on this Redis ({lockguard}:scan:lease is held); "
            "try again when it finishes, within a minute if that scan died"
        )
    gen = current_gen(client)
    _unlink_table(client, gen + 1)  # a partial table from a scan that died
    return token, gen


def _unlink_table(client: redis.Redis, gen: int) -> None:
    """Lease table `gen`: one hash, or on a Redis Cluster one per primary and the plan."""
    if slots.is_cluster(client):
        lease_plan.drop(client, gen)  # type: ignore[arg-type]
    else:
        client.unlink(lease_table(gen))


def refresh_scan(client: redis.Redis, token: bytes) -> None:
    """Keep the scan lease while the scan runs. Not atomic with the check, which is fine: the
    worst case extends a lease that was ours a moment ago."""
    if client.get(SCAN_LEASE) == token:
        client.pexpire(SCAN_LEASE, SCAN_LEASE_MS)


def write_leases(client: redis.Redis, gen: int, records: dict[bytes, bytes]) -> None:
    if records:
        client.hset(lease_table(gen), mapping=cast("dict[EncodableT, EncodableT]", records))


def commit_scan(client: redis.Redis, token: bytes, gen: int, summary: Mapping[str, Any],
                now_ms: int) -> None:
    """Switch to the lease table this scan wrote, drop the old one, record the summary and the
    heartbeat, and give the scan lease back: all in one MULTI, and only if the lease is still
    ours (otherwise another scan took over and this one's table is thrown away)."""
    new_gen = gen + 1
    with client.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(SCAN_LEASE)
            if pipe.get(SCAN_LEASE) != token:
                pipe.unwatch()
                _unlink_table(client, new_gen)
                raise ScanBusyError("this scan's lease expired and another scan took over; "
                                    "its results were not saved")
            pipe.multi()
            pipe.set(LEASE_GEN, new_gen)
            pipe.unlink(lease_table(gen))
            pipe.set(LAST_SCAN, json.dumps(dict(summary), separators=(",", ":")))
            pipe.set(HEARTBEAT, now_ms, px=HEARTBEAT_MS)
            pipe.delete(SCAN_LEASE)
            pipe.execute()
        except redis.WatchError:
            _unlink_table(client, new_gen)
            raise ScanBusyError("another scan took over while this one was committing; "
                                "its results were not saved") from None
    if slots.is_cluster(client):
        _unlink_table(client, gen)  # the MULTI switched gen: the old tables are garbage now


def abort_scan(client: redis.Redis, token: bytes, gen: int) -> None:
    """Give up a scan: the scan lease is given back, its partial table goes (or, where a
    Cluster node is down, the next scan clears it), the previous state stays in force."""
    if client.get(SCAN_LEASE) == token:
        client.delete(SCAN_LEASE)
    _unlink_table(client, gen + 1)


def last_scan(client: redis.Redis) -> dict[str, Any] | None:
    raw = client.get(LAST_SCAN)
    return json.loads(raw) if raw else None
