"""Before any lock of an approved case is touched: would lockguard propose it right now?

A case record could be stale or edited by hand, so each lock is read again and judged exactly as a
scan would: the same layout and identity, not `not_a_lock`, and by lockguard's own tenure record
still a releasable verdict. A `deadlock` goes only while its cycle still holds
(`bot.evidence.cycle_check`). Then the release script compares the exact bytes again, atomically.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import redis

from bot.cases.case import CaseLock
from bot.core import globs, tenures
from bot.core.layouts import MAX_TOKEN_BYTES, recognize
from bot.core.model import Layout, Reason, Snapshot
from bot.core.rules import Policy, classify, releasable
from bot.evidence.cycle_check import Cycle, cycles_hold
from bot.release import Outcome
from bot.scan import MAX_FIELDS
from bot.store import keyspace, scans, slots, tenure_plan

#: Tenure records per HMGET, as the scan writes them.
READ_CHUNK = scans.WRITE_CHUNK


@dataclass(frozen=True, slots=True)
class Verdict:
    """`outcome` None: the lock may go to the release script (`reason`: its verdict now)."""

    outcome: Outcome | None
    detail: str = ""
    reason: Reason | None = None


#: A case lock outside today's `LOCKGUARD_LOCK_PATTERNS` (changed, or the record edited) is
#: never touched.
OUTSIDE = Verdict(
    Outcome.SKIPPED_UNPROVEN,
    "skipped: the key is outside the configured lock patterns "
    "(LOCKGUARD_LOCK_PATTERNS); lockguard never touches it",
)


def recheck(
    client: redis.Redis,
    locks: list[CaseLock],
    policy: Policy,
    patterns: Sequence[bytes],
    exact: Sequence[bytes] | None = None,
) -> list[Verdict]:
    """One verdict per lock. `exact`: each lock's exact key where it is not `key` (an oversized
    key). A lock no pattern matches is refused without being read."""
    keys = list(exact) if exact is not None else [lk.key for lk in locks]
    allowed = [globs.matches_any(patterns, k) for k in keys]
    chosen = [(lk, k) for lk, k, ok in zip(locks, keys, allowed, strict=True) if ok]
    judged = iter(_recheck(client, chosen, policy))
    return [next(judged) if ok else OUTSIDE for ok in allowed]


def _recheck(  # noqa: C901, PLR0912 (the one read before a delete: one place, read straight)
    client: redis.Redis, chosen: list[tuple[CaseLock, bytes]], policy: Policy
) -> list[Verdict]:
    if not chosen:
        return []
    locks = [lk for lk, _ in chosen]
    gen = scans.current_gen(client)
    keys = [k for _, k in chosen]  # what is read; the tenure records are filed under `lk.key`
    # On a Redis Cluster TIME cannot be pipelined (it names no key) and each lock's tenure
    # record is in the table the generation's plan gave its slot (`bot.store.tenure_plan`).
    cluster = slots.is_cluster(client)
    clock = client.time() if cluster else None
    plan = tenure_plan.load(client, gen) if cluster else None  # type: ignore[arg-type]
    with client.pipeline(transaction=False) as pipe:
        if clock is None:
            pipe.time()
        for k in keys:
            pipe.type(k)
            pipe.pttl(k)
        names = [lk.key for lk in locks]
        if cluster:
            for k in names:
                pipe.hget(
                    plan.table_of(slots.slot_of(k)) if plan else keyspace.tenure_table(gen), k
                )
        else:  # HMGETs of at most READ_CHUNK fields: each one short
            for i in range(0, len(names), READ_CHUNK):
                pipe.hmget(keyspace.tenure_table(gen), names[i : i + READ_CHUNK])
        facts = pipe.execute()  # the first refusal raises
    head = 0 if cluster else 1
    now = scans.time_ms(clock if clock is not None else facts[0])
    read = facts[head : head + 2 * len(keys)]
    tail = facts[head + 2 * len(keys) :]
    records = tail if cluster else [r for chunk in tail for r in chunk]
    types = [t.decode() if isinstance(t, bytes) else str(t) for t in read[0::2]]
    pttls = [int(p) for p in read[1::2]]
    with client.pipeline(transaction=False) as pipe:
        for k, t in zip(keys, types, strict=True):
            if t == "string":
                pipe.strlen(k)
                pipe.getrange(k, 0, MAX_TOKEN_BYTES)
            elif t == "hash":
                pipe.hlen(k)
                pipe.hscan(k, 0, count=MAX_FIELDS * 2)
        values = iter(pipe.execute())
    over = _cycles(client, [lk.cycle for lk in locks if lk.reason is Reason.DEADLOCK], now)
    out = []
    for lock, t, pttl, record in zip(locks, types, pttls, records, strict=True):
        snap = Snapshot(lock.key, t, pttl, -1, now, big=lock.big)
        if t == "string":
            snap.value_len, snap.value = int(next(values)), next(values)
        elif t == "hash":
            size, scanned = next(values), next(values)
            snap.fields, snap.hash_len = tuple(scanned[1].items())[:MAX_FIELDS], int(size)
        broken = next(over) if lock.reason is Reason.DEADLOCK else ""
        out.append(_judge(lock, snap, record, policy, broken))
    return out


def _cycles(client: redis.Redis, cycles: list[Cycle], now_ms: int) -> Iterator[str | Verdict]:
    """Each cycle: "" it holds, else why not; a refused read is an error for these locks only."""
    if not cycles:
        return iter([])
    try:
        return iter(cycles_hold(client, cycles, now_ms))
    except redis.RedisError as exc:
        said = f"not released: could not read its deadlock's cycle again ({type(exc).__name__})"
        return iter([Verdict(Outcome.ERROR, said)] * len(cycles))


def _judge(
    lock: CaseLock,
    snap: Snapshot,
    record: bytes | None,
    policy: Policy,
    broken: str | Verdict = "",
) -> Verdict:
    if snap.type == "none":
        return Verdict(Outcome.ALREADY_GONE, "already gone: the key no longer exists")
    rec = recognize(snap, policy.loose_recognition)
    if rec.not_a_lock:
        return Verdict(
            Outcome.SKIPPED_UNPROVEN,
            f"skipped: lockguard does not take this key for a lock now ({rec.not_a_lock})",
        )
    if rec.layout is not lock.layout or rec.identity != lock.identity:
        return Verdict(
            Outcome.SKIPPED_REACQUIRED,
            f"skipped: re-acquired or changed since approval (now {rec.layout.value}, "
            "not the approved holder)",
        )
    prev = tenures.decode(record)
    if prev is None or prev.identity_digest != tenures.identity_digest(lock.identity):
        return Verdict(
            Outcome.SKIPPED_UNPROVEN,
            "skipped: lockguard's tenure records do not show this holder (no completed "
            "scan has seen it as approved); run a scan and decide again",
        )
    if lock.reason is Reason.DEADLOCK:
        return _deadlock(lock, broken)
    tenure = tenures.track(prev, snap, rec)
    reason = classify(tenure, snap.pttl_ms, rec.layout, snap.observed_ms, policy)
    held = snap.observed_ms - tenure.first_seen_ms
    ok, note = releasable(
        reason, rec.layout, held, policy, partial=snap.hash_len > len(snap.fields)
    )
    if ok:
        return Verdict(None, reason=reason)
    if reason is Reason.LONG_HELD_RENEWING and rec.layout is Layout.COUNTER:
        return Verdict(
            Outcome.SKIPPED_REACQUIRED,
            "skipped: its TTL was re-armed with no new count: re-created by a new "
            "owner or renewed by its holder since it was seen",
        )
    if reason is Reason.LONG_HELD_RENEWING:
        return Verdict(
            Outcome.RECOVERED,
            "recovered: its owner has been renewing it since it was seen; nothing changed",
        )
    why = f" ({note})" if note else ""
    return Verdict(
        Outcome.SKIPPED_UNPROVEN,
        f"skipped: by lockguard's own records it is {reason.value} now, which is not released{why}",
    )


def _deadlock(lock: CaseLock, broken: str | Verdict) -> Verdict:
    if isinstance(broken, Verdict):
        return broken
    if not any(key == lock.key for key, _ in lock.cycle):
        broken = "the cycle shown does not include this lock"
    if broken:
        return Verdict(
            Outcome.SKIPPED_UNPROVEN,
            f"skipped: the deadlock it was approved for is over ({broken}); nothing changed",
        )
    return Verdict(None, reason=Reason.DEADLOCK)
