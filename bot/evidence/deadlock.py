"""Deadlocks among Redisson fair locks, and whether a Redisson holder's instance is alive.

`RedissonLocks` (the scan's `on_redisson`) keeps the Redisson locks whose holders can all be
proven, and per instance (`<uuid>` of `<uuid>:<threadId>`) the locks seen renewed. `detect` then
reads their fair queues and the deadlines of queued holders (a thread waits only while its
deadline is ahead of the server's clock: Redisson drops it after) and finds the wait-for cycles.
Each cycle is ONE `deadlock` finding, for the lock whose queue has the most waiters (on a tie the
youngest, then the first key); the cycle's other locks are named in `cycle`, never released.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import redis

from bot.core.display import duration, escape
from bot.core.layouts import recognize
from bot.core.model import Finding, Layout, Reason, Recognized, Snapshot, Tenure
from bot.core.rules import Policy, is_renewing, releasable
from bot.core.waitfor import Link, find_cycles
from bot.evidence.queues import QUEUE_READ, read_deadlines, read_queues

#: Redisson locks whose queues a scan reads, at most (the first met; the summary counts the rest).
LOCK_LIMIT = 50_000
#: Longer lock keys are left out of the check (a cycle of them would not fit a message).
MAX_KEY_BYTES = 4096
#: Instances remembered, and locks seen renewed per instance (one more than the lock itself).
_INSTANCES = 50_000
_RENEWED_PER_INSTANCE = 2


#: `_Seen` as a plain tuple, its reason an index into `_REASONS`: a tuple of only ints and bytes
#: is untracked by the garbage collector, so 50,000 of them cost its passes nothing.
_Stored = tuple[tuple[tuple[bytes, bytes], ...], int, int, int, int, int, int, int]
_REASONS = tuple(Reason)
_INDEX = {r: i for i, r in enumerate(_REASONS)}


class _Seen(NamedTuple):
    """What a deadlock finding needs of a lock."""

    fields: tuple[tuple[bytes, bytes], ...]  # the identity and owner are made from them again
    pttl_ms: int
    idle_s: int
    observed_ms: int
    first_seen_ms: int
    observations: int
    rearms: int
    reason: Reason


def instance(holder: bytes) -> bytes:
    """The Redisson instance id of a holder field `<uuid>:<threadId>`."""
    return holder.rpartition(b":")[0]


class RedissonLocks:
    def __init__(self, policy: Policy, limit: int | None = None) -> None:
        self.policy = policy
        self.limit = LOCK_LIMIT if limit is None else limit
        self.seen: dict[bytes, _Stored] = {}
        self.beyond = 0  # Redisson locks past `limit`, not checked
        self.left_out = 0  # huge keys or partly read hashes, not checked
        self.renewed: dict[bytes, list[bytes]] = {}

    def __call__(self, snap: Snapshot, rec: Recognized, tenure: Tenure, reason: Reason) -> None:
        if tenure.rearms and is_renewing(tenure, snap.observed_ms, self.policy):
            for holder, _ in snap.fields:
                keys = self.renewed.get(instance(holder))
                if keys is None and len(self.renewed) < _INSTANCES:
                    self.renewed[instance(holder)] = [snap.key]
                elif keys is not None and len(keys) < _RENEWED_PER_INSTANCE:
                    keys.append(snap.key)
        if len(snap.key) > MAX_KEY_BYTES or snap.hash_len > len(snap.fields):
            self.left_out += 1
        elif len(self.seen) >= self.limit:
            self.beyond += 1
        else:
            self.seen[snap.key] = (
                snap.fields,
                snap.pttl_ms,
                snap.idle_s,
                snap.observed_ms,
                tenure.first_seen_ms,
                tenure.observations,
                tenure.rearms,
                _INDEX[reason],
            )

    def of(self, key: bytes) -> _Seen:
        fields, pttl, idle, observed, first_seen, observations, rearms, reason = self.seen[key]
        return _Seen(
            fields, pttl, idle, observed, first_seen, observations, rearms, _REASONS[reason]
        )

    def owner(self, f: Finding) -> tuple[bool | None, str] | None:
        """(True, the lock that shows it) when another lock of the owner's instance was seen
        renewed, else (None, why): never False, no renewal seen does not prove it gone. None
        for another layout."""
        if f.layout is not Layout.REDISSON or not f.fields:
            return None
        for holder, _ in f.fields:
            for key in self.renewed.get(instance(holder), ()):
                if key != f.key:
                    return True, f"instance {_short(instance(holder))} renews {escape(key, 60)}"
        said = _short(instance(f.fields[0][0]))
        return None, (
            f"no other lock of instance {said} seen renewed (that does not prove it gone)"
        )


@dataclass(frozen=True, slots=True)
class Deadlocks:
    findings: tuple[Finding, ...]
    #: What the check covered, for the scan's summary (`deadlocks` in `scan --json`).
    summary: dict[str, object]
    #: Each deadlock finding's lock, with the verdict the scan gave it before (to recount).
    replaced: tuple[Reason, ...] = ()


def detect(client: redis.Redis, locks: RedissonLocks, now_ms: int) -> Deadlocks:
    """A refused read leaves the check undone, said in the summary; the scan goes on."""
    summary: dict[str, object] = {
        "redisson_locks_checked": len(locks.seen),
        "not_checked": locks.beyond + locks.left_out,
        "cycles": 0,
    }
    if locks.beyond:
        summary["note"] = (
            f"only the first {locks.limit:,} Redisson locks were checked for deadlocks; "
            f"{locks.beyond:,} more {'was' if locks.beyond == 1 else 'were'} not"
        )
    if not locks.seen:
        return Deadlocks((), summary)
    try:
        queues = read_queues(client, list(locks.seen))
        if not queues:  # no fair lock has a waiter: the usual case, and nothing more to read
            return Deadlocks((), summary)
        holding = {h for s in locks.seen.values() for h, _ in s[0]}
        holders = {k: [h for h, _ in locks.seen[k][0]] for k in queues}
        pairs = [
            (k, w)
            for k, entries in queues.items()
            for w in entries
            if w in holding and w not in holders[k]
        ]
        deadlines = read_deadlines(client, pairs)
    except redis.RedisError as exc:
        summary["note"] = f"deadlocks not checked: a queue read was refused ({type(exc).__name__})"
        return Deadlocks((), summary)
    waits: dict[bytes, list[bytes]] = defaultdict(list)
    for (k, w), deadline in deadlines.items():
        if deadline > now_ms:
            waits[w].append(k)
    # A lock is on a cycle only if it has waiters and one of its holders waits somewhere.
    graph = {k: holders[k] for k in queues if any(h in waits for h in holders[k])}
    cycles = find_cycles(graph, waits)
    summary["cycles"] = len(cycles.found) + cycles.too_long + cycles.beyond
    if cycles.too_long or cycles.beyond:
        summary["not_reported"] = cycles.too_long + cycles.beyond
    found = [_finding(c, locks, queues) for c in cycles.found]
    return Deadlocks(
        tuple(f for f, _ in found), summary, tuple(locks.of(f.key).reason for f, _ in found)
    )


def _finding(
    cycle: Sequence[Link], locks: RedissonLocks, queues: dict[bytes, list[bytes]]
) -> tuple[Finding, int]:

    def held(link: Link) -> float:
        s = locks.of(link.lock)
        return (s.observed_ms - s.first_seen_ms) / 1000

    def rank(link: Link) -> tuple[int, float, bytes]:
        return (-len(queues[link.lock]), held(link), link.lock)

    chosen = min(cycle, key=rank)
    at = list(cycle).index(chosen)
    ordered = tuple(cycle[at:]) + tuple(cycle[:at])
    most = len(queues[chosen.lock])
    tied = sum(1 for link in cycle if len(queues[link.lock]) == most)
    s = locks.of(chosen.lock)
    waiters = f"{most:,}{'+' if most >= QUEUE_READ else ''} queued"
    why = (
        f"proposed: its queue has the most waiters of the cycle ({waiters}); releasing it lets "
        "the most threads go on and breaks the cycle. The other locks are left alone."
        if tied == 1
        else f"proposed: of the locks whose queues have the most waiters ({waiters}), it is the "
        f"youngest (held {duration(held(chosen))}): releasing it cuts the least work short "
        "and breaks the cycle. The other locks are left alone."
    )
    ok, note = releasable(Reason.DEADLOCK, Layout.REDISSON, 0, locks.policy)
    snap = Snapshot(
        chosen.lock,
        "hash",
        s.pttl_ms,
        s.idle_s,
        s.observed_ms,
        fields=s.fields,
        hash_len=len(s.fields),
    )
    rec = recognize(snap, locks.policy.loose_recognition)  # the identity and owner, as scanned
    finding = Finding(
        key=chosen.lock,
        type="hash",
        layout=Layout.REDISSON,
        reason=Reason.DEADLOCK,
        identity=rec.identity,
        owner=rec.owner,
        ttl_ms=s.pttl_ms,
        held_seconds=held(chosen),
        idle_seconds=s.idle_s,
        observations=s.observations,
        rearms=s.rearms,
        counter=None,
        observed_ms=s.observed_ms,
        fields=s.fields,
        releasable=ok,
        note=note or why,
        cycle=tuple((link.lock, link.holder) for link in ordered),
    )
    return finding, most


def _short(uuid: bytes) -> str:
    return escape(uuid[:8], 16) + ("…" if len(uuid) > 8 else "")
