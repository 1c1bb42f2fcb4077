"""lockguard's own scan state in Redis: the scan lease, tenure tables, last scan, heartbeat.

Tenure tables are generational, so vanished locks' tenures go without holding the keyspace in
memory: a scan writes table N+1 (reading N), and only a completed scan switches to N+1 and
unlinks N, in one MULTI; a scan that dies leaves N in force. A *narrowed* scan must keep everyone
else's history: it merges N+1 into N and keeps N (`commit_narrowed`). The scan lease's value is
`<token>|<holder>`, so a second scan is told who it waits for.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any, cast

import redis
from redis.cluster import RedisCluster
from redis.typing import EncodableT

from bot.core import clock
from bot.core.display import DEFAULT_LIMIT, key_text
from bot.core.errors import ScanBusyError
from bot.core.impact import impact_json
from bot.core.model import FINDING_REASONS, Finding, Impact
from bot.store import lease_keys, slots, tenure_plan
from bot.store.keyspace import HEARTBEAT, LAST_SCAN, SCAN_LEASE, TENURE_GEN, tenure_table

SCAN_LEASE_MS = 60_000
HEARTBEAT_MS = 15 * 60_000
#: Records a narrowed scan merges per HSCAN / HSET (each well under a millisecond of Redis).
MERGE_CHUNK = 200
#: Tenure records per HSET (pipelined), so no one command holds Redis for long.
WRITE_CHUNK = 200
#: The findings the last-scan record keeps, worst first by impact (`record_worst`).
WORST_KEPT = 10
#: Characters of a recorded finding's owner and owner evidence (its key: DEFAULT_LIMIT, escaped).
_WORST_TEXT = 200
_HOLDER = re.compile(rb"[A-Za-z0-9 _:.-]{1,60}")
_HOLDER_WORDS = {"schedule": "the schedule", "webhook": "the webhook", "cli": "the CLI"}


def server_ms(client: redis.Redis) -> int:
    """The server's clock in ms: every age and timestamp lockguard records."""
    return time_ms(client.time())


def time_ms(reply: tuple[int, int]) -> int:
    return clock.time_ms(*reply)


def current_gen(client: redis.Redis) -> int:
    """The tenure-table generation in force (0 before the first completed scan)."""
    raw = client.get(TENURE_GEN)
    return int(raw) if isinstance(raw, bytes) and raw.isdigit() else 0


def scan_holder(trigger: str, requested_by: str = "") -> str:
    return f"{trigger} {requested_by}".strip()


def holder_text(raw: object) -> str:
    """Who holds the scan lease, in words ("U012AB3CD (/lockguard scan)"), from its value (not
    trusted: bounded and checked)."""
    if not isinstance(raw, bytes) or b"|" not in raw:
        return "another lockguard"
    holder = raw.split(b"|", 1)[1]
    if not _HOLDER.fullmatch(holder):
        return "another lockguard"
    trigger, _, user = holder.decode().partition(" ")
    if trigger == "slash" and user:
        return f"{user} (/lockguard scan)"
    return _HOLDER_WORDS.get(trigger, f"another lockguard ({trigger})")


def begin_scan(client: redis.Redis, holder: str = "") -> tuple[bytes, int]:
    """Take the scan lease and clear the next tenure table: (lease value, current gen)."""
    token = secrets.token_hex(16).encode() + b"|" + holder.encode()[:60]
    if not lease_keys.take(client, SCAN_LEASE, token, SCAN_LEASE_MS):
        with client.pipeline(transaction=False) as pipe:
            pipe.get(SCAN_LEASE)
            pipe.pttl(SCAN_LEASE)
            held, left = pipe.execute()
        within = f"{-(-int(left) // 1000)}s" if isinstance(left, int) and left > 0 else "a minute"
        raise ScanBusyError(
            f"a scan is running on this Redis, started by {holder_text(held)}; try again when "
            f"it finishes (if that scan died, its lease ends within {within})"
        )
    try:
        gen = current_gen(client)
        _unlink_table(client, gen + 1)  # a partial table from a scan that died
    except BaseException:  # the lease is not kept for nothing
        with suppress(redis.RedisError):
            lease_keys.give_back(client, SCAN_LEASE, token)
        raise
    return token, gen


def _unlink_table(client: redis.Redis, gen: int) -> None:
    if slots.is_cluster(client):
        tenure_plan.drop(client, gen)  # type: ignore[arg-type]
    else:
        client.unlink(tenure_table(gen))


def refresh_scan(client: redis.Redis, token: bytes) -> bool:
    """False when the scan lease is no longer ours."""
    return lease_keys.renew(client, SCAN_LEASE, token, SCAN_LEASE_MS)


def write_tenures(client: redis.Redis, gen: int, records: dict[bytes, bytes]) -> None:
    write_table(client, tenure_table(gen), records)


def write_table(client: redis.Redis, table: bytes, records: dict[bytes, bytes]) -> None:
    commands = tenure_writes(table, records)
    if len(commands) <= 1:
        if commands:
            client.execute_command(*commands[0])
        return
    with client.pipeline(transaction=False) as pipe:
        for command in commands:
            pipe.execute_command(*command)
        pipe.execute()


def tenure_writes(table: bytes, records: dict[bytes, bytes]) -> list[tuple[EncodableT, ...]]:
    """The HSET commands that write `records` into `table`, WRITE_CHUNK records each."""
    flat: list[EncodableT] = [x for pair in records.items() for x in pair]
    step = 2 * WRITE_CHUNK
    return [("HSET", table, *flat[i : i + step]) for i in range(0, len(flat), step)]


def commit_scan(
    client: redis.Redis, token: bytes, gen: int, summary: Mapping[str, Any] | None, now_ms: int
) -> None:
    """Switch to the table this scan wrote, drop the old one, record `summary` and the heartbeat
    (unless None), and give the lease back: in one MULTI, only if the lease is still ours."""
    new_gen = gen + 1
    with client.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(SCAN_LEASE)
            if pipe.get(SCAN_LEASE) != token:
                pipe.unwatch()
                _unlink_table(client, new_gen)
                raise ScanBusyError(
                    "this scan's lease expired and another scan took over; "
                    "its results were not saved"
                )
            pipe.multi()
            pipe.set(TENURE_GEN, new_gen)
            pipe.unlink(tenure_table(gen))
            if summary is not None:
                pipe.set(LAST_SCAN, json.dumps(dict(summary), separators=(",", ":")))
                pipe.set(HEARTBEAT, now_ms, px=HEARTBEAT_MS)
            pipe.delete(SCAN_LEASE)
            pipe.execute()
        except redis.WatchError:
            _unlink_table(client, new_gen)
            raise ScanBusyError(
                "another scan took over while this one was committing; its results were not saved"
            ) from None
    if slots.is_cluster(client):
        _unlink_table(client, gen)  # the MULTI switched gen: the old tables are garbage now


def commit_narrowed(client: redis.Redis, token: bytes, gen: int) -> None:
    """End a narrowed scan: merge table N+1 into N, which stays in force (and so do the last
    summary and heartbeat), drop N+1, give the lease back. With no readable N, N+1 is switched to
    as after a full scan."""
    cluster = slots.is_cluster(client)
    prev = tenure_plan.load(client, gen) if cluster else None  # type: ignore[arg-type]
    if gen == 0 or (cluster and prev is None):
        commit_scan(client, token, gen, None, 0)  # no summary: no heartbeat, no time needed
        return
    if cluster:
        _merge_cluster(client, token, gen, prev)  # type: ignore[arg-type]
    else:
        _merge(client, token, tenure_table(gen + 1), lambda _key: tenure_table(gen))
    lost = ScanBusyError(
        "this scan's lease expired and another scan took over; its tenure records may be "
        "partly saved"
    )
    if not refresh_scan(client, token):
        raise lost
    _unlink_table(client, gen + 1)  # while the lease is ours: after it, N+1 is the next scan's
    if not lease_keys.give_back(client, SCAN_LEASE, token):
        raise lost


def _merge(
    client: redis.Redis, token: bytes, source: bytes, target_of: Callable[[bytes], bytes | None]
) -> None:
    """Copy every record of `source` into the table `target_of(key)` names (None: dropped). A
    lease lost stops the merge before its next write (the new holder may have dropped the
    target: writing on would leave a table nobody drops)."""
    cursor = 0
    while True:
        if not refresh_scan(client, token):
            raise ScanBusyError(
                "this scan's lease expired and another scan took over; its tenure records "
                "were partly saved"
            )
        cursor, chunk = client.hscan(source, cursor, count=MERGE_CHUNK)
        by_table: dict[bytes, dict[bytes, bytes]] = {}
        for key, record in cast("dict[bytes, bytes]", chunk).items():
            table = target_of(key)
            if table is not None:
                by_table.setdefault(table, {})[key] = record
        for table, records in by_table.items():
            write_table(client, table, records)
        if cursor == 0:
            return


def _merge_cluster(
    client: RedisCluster, token: bytes, gen: int, prev: tenure_plan.TenurePlan
) -> None:
    """Each record to the table generation N's plan gives its slot (none: dropped)."""
    mine = tenure_plan.load(client, gen + 1)
    if mine is None:
        return

    def target_of(key: bytes) -> bytes | None:
        slot = slots.slot_of(key)
        return None if prev.owners[slot] == tenure_plan.NO_TABLE else prev.table_of(slot)

    for table in mine.names():
        _merge(client, token, table, target_of)  # type: ignore[arg-type]


def abort_scan(client: redis.Redis, token: bytes, gen: int) -> None:
    """Give up a scan: its partial table goes only while the lease is still ours (then N+1 is the
    next scan's), and the lease is given back whatever failed."""
    try:
        if refresh_scan(client, token):
            _unlink_table(client, gen + 1)
    finally:
        lease_keys.give_back(client, SCAN_LEASE, token)


def last_scan(client: redis.Redis) -> dict[str, Any] | None:
    raw = client.get(LAST_SCAN)
    return json.loads(raw) if raw else None


def worst_entry(f: Finding) -> dict[str, Any]:
    """A ranked finding as the last-scan record keeps it, for people only: the key escaped and
    cut, so the record stays small."""
    impact = f.impact or Impact()
    return {
        "key": key_text(f.key, f.big, DEFAULT_LIMIT),
        "layout": f.layout.value,
        "reason": f.reason.value,
        "owner": f.owner[:_WORST_TEXT],
        "held_seconds": round(f.held_seconds, 3),
        "ttl_ms": f.ttl_ms,
        "impact": {
            **impact_json(impact),
            "owner_evidence": impact.owner_evidence[:_WORST_TEXT],
            "woken": impact.woken,
        },
    }


def record_worst(client: redis.Redis, at_ms: int, findings: list[Finding]) -> bool:
    """Add the first WORST_KEPT flagged `findings` (ranked) to the last-scan record, only while
    it is the one the scan at `at_ms` committed. True when recorded."""
    worst = [worst_entry(f) for f in findings if f.reason in FINDING_REASONS][:WORST_KEPT]
    with client.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(LAST_SCAN)
            raw = pipe.get(LAST_SCAN)
            record = _json(raw)
            if not isinstance(record, dict) or record.get("server_time_ms") != at_ms:
                pipe.unwatch()
                return False
            pipe.multi()
            pipe.set(LAST_SCAN, json.dumps({**record, "worst": worst}, separators=(",", ":")))
            pipe.execute()
        except redis.WatchError:  # another scan committed meanwhile: its record stands
            return False
    return True


def _json(raw: object) -> object:
    try:
        return json.loads(raw) if isinstance(raw, bytes) else None
    except ValueError:  # not lockguard's JSON: left as it is
        return None
