"""Approval cases in Redis: exactly what a human was shown, and what they decided.

A case holds, for every lock, the exact key bytes, layout, identity bytes, reason, age and TTL
that were shown (as hex in JSON, so nothing is lost). One scan opens at most one case, of every
releasable finding not already in a live case and not rejected (any number of locks: they are
streamed into the case batch by batch, so memory stays flat). It moves through

    opening --scan done--> pending --approve--> approved --release--> released | incomplete
                                   --reject---> rejected             (some lock errored: resume)
                                   (past its expiry) expired        (cannot be approved; rescan)

An `opening` case is being filled by a scan and cannot be decided; if that scan dies it lapses
by itself (its keys expire) and its locks are free again. Every transition is one Lua script
(`bot.cases.scripts`), so a double click, two approvers at once or two bot replicas produce
exactly one winner; the others are told who decided first.

Keys: `{lockguard}:case:<id>` (hash), `...:locks` (list), `...:outcomes` (hash),
`{lockguard}:cases`, `{lockguard}:open-locks`, `{lockguard}:rejections`,
`{lockguard}:manifest:<id>`; see `bot.store.keyspace`.
"""

from __future__ import annotations

import enum
import json
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import redis

from bot.cases.scripts import ADD_LUA, APPROVE_LUA, FINISH_LUA, RECORD_LUA, TRANSITION_LUA
from bot.core.clock import day_utc
from bot.core.display import escape, key_json
from bot.core.errors import CaseError
from bot.core.leases import identity_digest
from bot.core.model import Finding, Layout, Reason
from bot.store.keyspace import (
    CASE_PREFIX,
    CASES,
    OPEN_LOCKS,
    REJECTIONS,
    case_key,
    locks_key,
    manifest_key,
    outcomes_key,
)

CASE_ID = re.compile(r"LG-\d{6}-[0-9a-f]{6}")
#: Locks of a case read (and released) per round trip.
BATCH = 500
#: Locks and outcomes loaded with a case for people to see; the rest are read in batches.
PREVIEW = 50
#: An opening case whose scan sends no batch for this long has died: its keys expire.
OPENING_TTL_MS = 120_000
#: The case record's format (`v`): records of another format are not read as cases.
FORMAT = b"2"


class State(enum.StrEnum):
    OPENING = "opening"
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    RELEASED = "released"
    INCOMPLETE = "incomplete"


@dataclass(frozen=True, slots=True)
class CaseLock:
    """One lock as shown to the approver: exact bytes and the evidence."""

    key: bytes
    layout: Layout
    identity: bytes
    reason: Reason
    ttl_ms: int
    observed_ms: int
    held_seconds: float
    owner: str = ""
    counter: int | None = None
    type: str = "string"

    @classmethod
    def from_finding(cls, f: Finding) -> CaseLock:
        return cls(
            key=f.key,
            layout=f.layout,
            identity=f.identity,
            reason=f.reason,
            ttl_ms=f.ttl_ms,
            observed_ms=f.observed_ms,
            held_seconds=f.held_seconds,
            owner=f.owner,
            counter=f.counter,
            type=f.type,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            **key_json(self.key),
            "layout": self.layout.value,
            "identity_hex": self.identity.hex(),
            "reason": self.reason.value,
            "ttl_ms": self.ttl_ms,
            "observed_ms": self.observed_ms,
            "held_seconds": round(self.held_seconds, 3),
            "owner": self.owner,
            "counter": self.counter,
            "type": self.type,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CaseLock:
        counter = d.get("counter")
        return cls(
            key=bytes.fromhex(d["key_hex"]),
            layout=Layout(d["layout"]),
            identity=bytes.fromhex(d["identity_hex"]),
            reason=Reason(d["reason"]),
            ttl_ms=int(d["ttl_ms"]),
            observed_ms=int(d["observed_ms"]),
            held_seconds=float(d["held_seconds"]),
            owner=str(d.get("owner", "")),
            counter=int(counter) if counter is not None else None,
            type=str(d.get("type", "string")),
        )


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    state: State
    created_ms: int
    expires_ms: int
    locks: tuple[CaseLock, ...]  # the first PREVIEW locks, in order (all of a small case)
    lock_count: int = 0
    decided_by: str = ""
    decided_ms: int | None = None
    decision_reason: str = ""
    outcomes: tuple[dict[str, Any], ...] = field(default=())  # those of `locks`, in order
    outcome_counts: dict[str, int] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    dry_run: bool = False
    #: Approvals recorded so far, (approver, server ms), in order: one while a case that needs
    #: two waits for the second.
    approvals: tuple[tuple[str, int], ...] = ()

    def effective_state(self, now_ms: int) -> State:
        if self.state is State.PENDING and now_ms >= self.expires_ms:
            return State.EXPIRED
        return self.state

    @property
    def nothing_released(self) -> bool:
        """A closed release in which no lock was released (every one skipped, recovered or
        already gone): it must not read "Released"."""
        return (
            self.state is State.RELEASED
            and not self.dry_run
            and not self.outcome_counts.get("released", 0)
        )

    def state_text(self, now_ms: int) -> str:
        """The state in words for people: `released`, or `closed, nothing released`."""
        if self.nothing_released:
            return "closed, nothing released"
        return self.effective_state(now_ms).value


def new_case_id(now_ms: int) -> str:
    return f"LG-{day_utc(now_ms)}-{secrets.token_hex(3)}"


def check_case_id(text: str) -> str:
    case_id = text.strip()
    if not CASE_ID.fullmatch(case_id):
        raise CaseError(
            f"malformed case id {escape(case_id.encode(), 40)!r}: expected LG-YYMMDD-xxxxxx "
            "(as shown by `lockguard cases`)"
        )
    return case_id


def parse_outcome(raw: bytes) -> dict[str, Any]:
    """An outcome record (`<outcome>\n<JSON>`) as one dict with at least `outcome`."""
    name, _, body = raw.partition(b"\n")
    try:
        data = json.loads(body) if body else {}
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    data["outcome"] = name.decode("utf-8", "replace")
    return data


@dataclass(frozen=True, slots=True)
class Added:
    added: int = 0
    in_live_case: int = 0
    snoozed: int = 0


class CaseStore:
    def __init__(self, client: redis.Redis, *, retention_ms: int) -> None:
        self.client = client
        self.retention_ms = retention_ms
        self._add = client.register_script(ADD_LUA)
        self._finish = client.register_script(FINISH_LUA)
        self._transition = client.register_script(TRANSITION_LUA)
        self._approve = client.register_script(APPROVE_LUA)
        self._record = client.register_script(RECORD_LUA)

    # -- opening -----------------------------------------------------------------------------

    def add(self, case_id: str, locks: list[CaseLock], now_ms: int, expires_ms: int) -> Added:
        """Put these locks in the opening case `case_id` (created by the first lock added),
        leaving out those in another live case and those rejected with the same identity."""
        if not locks:
            return Added()
        args: list[Any] = [case_id, now_ms, expires_ms, OPENING_TTL_MS, CASE_PREFIX]
        for lock in locks:
            args += [
                lock.key,
                identity_digest(lock.identity).hex(),
                json.dumps(lock.to_json(), separators=(",", ":")),
            ]
        reply = self._add(
            keys=[case_key(case_id), locks_key(case_id), OPEN_LOCKS, REJECTIONS], args=args
        )
        return Added(*(int(x) for x in reply))

    def finish(self, case_id: str, now_ms: int, summary: dict[str, Any]) -> Case | None:
        """The scan that filled the case completed: it becomes pending (decidable)."""
        ok = self._finish(
            keys=[case_key(case_id), locks_key(case_id), CASES],
            args=[case_id, now_ms, self.retention_ms, json.dumps(summary, separators=(",", ":"))],
        )
        return self.get(case_id) if int(ok) else None

    def abandon(self, case_id: str) -> None:
        """The scan that was filling the case failed: drop it and free its locks."""
        self._free_locks(case_id)
        self.client.delete(case_key(case_id), locks_key(case_id))

    def open(self, locks: list[CaseLock], now_ms: int, ttl_ms: int) -> Case | None:
        """A pending case of these locks in one step (those not in a live case or snoozed);
        None when none are left."""
        case_id = new_case_id(now_ms)
        if not self.add(case_id, locks, now_ms, now_ms + ttl_ms).added:
            return None
        return self.finish(case_id, now_ms, {})

    # -- reading -----------------------------------------------------------------------------

    def get(self, case_id: str) -> Case | None:
        with self.client.pipeline(transaction=False) as pipe:
            pipe.hgetall(case_key(case_id))
            pipe.lrange(locks_key(case_id), 0, PREVIEW - 1)
            pipe.hmget(outcomes_key(case_id), [str(i) for i in range(PREVIEW)])
            raw, locks, outs = pipe.execute()
        if not raw or raw.get(b"v") != FORMAT:
            return None  # none, or written by a version before format 2: lapses by itself
        return _case(raw, locks, outs)

    def locks(self, case_id: str) -> Iterator[list[tuple[int, CaseLock]]]:
        """Every lock of the case with its index, BATCH at a time."""
        return self._lock_batches(case_id)

    def _lock_batches(self, case_id: str) -> Iterator[list[tuple[int, CaseLock]]]:
        start = 0
        while True:
            rows = self.client.lrange(locks_key(case_id), start, start + BATCH - 1)
            if not rows:
                return
            yield [(start + i, CaseLock.from_json(json.loads(r))) for i, r in enumerate(rows)]
            if len(rows) < BATCH:
                return
            start += BATCH

    def outcomes_of(self, case_id: str, indexes: list[int]) -> list[dict[str, Any] | None]:
        if not indexes:
            return []
        raw = cast(
            "list[bytes | None]",
            self.client.hmget(outcomes_key(case_id), [str(i) for i in indexes]),
        )
        return [parse_outcome(r) if r is not None else None for r in raw]

    def recent(self, limit: int = 20) -> list[Case]:
        ids = cast("list[bytes]", self.client.zrevrange(CASES, 0, limit - 1))
        cases = (self.get(i.decode()) for i in ids)
        return [c for c in cases if c is not None]

    # -- deciding ----------------------------------------------------------------------------

    def transition(
        self,
        case_id: str,
        expected: State | tuple[State, ...],
        new: State,
        now_ms: int,
        **fields: str | int,
    ) -> str:
        states = expected if isinstance(expected, tuple) else (expected,)
        args: list[Any] = ["|".join(s.value for s in states), new.value, now_ms]
        for k, v in fields.items():
            args += [k, v]
        reply = self._transition(keys=[case_key(case_id)], args=args)
        return reply.decode() if isinstance(reply, bytes) else str(reply)

    def approve(
        self, case_id: str, approver: str, now_ms: int, *, required: int = 1, dry_run: bool = False
    ) -> tuple[str, int]:
        """One approval (`APPROVE_LUA`): (ok | waiting | same | the refusing state, approvals)."""
        word, n = self._approve(
            keys=[case_key(case_id)], args=[approver, now_ms, required, int(dry_run)]
        )
        return (word.decode() if isinstance(word, bytes) else str(word)), int(n)

    def record(self, case_id: str, rows: list[tuple[int, str, dict[str, Any]]]) -> None:
        """Outcome records (index, outcome, JSON body), counters kept exact."""
        for i in range(0, len(rows), BATCH):
            args: list[Any] = []
            for idx, outcome, body in rows[i : i + BATCH]:
                args += [idx, outcome, json.dumps(body, separators=(",", ":"))]
            self._record(keys=[outcomes_key(case_id), case_key(case_id)], args=args)

    def snooze(self, case_id: str, until_ms: int) -> None:
        """A rejection sticks: none of these locks is proposed again with the same identity
        before `until_ms`."""
        for batch in self._lock_batches(case_id):
            self.client.hset(
                REJECTIONS,
                mapping={
                    lock.key: f"{identity_digest(lock.identity).hex()}|{until_ms}|{case_id}"
                    for _, lock in batch
                },
            )

    def close(self, case: Case, now_ms: int) -> None:
        """A case reached a final state: its locks are free for new cases (rejected ones stay
        snoozed), and it is kept for the retention period."""
        self._free_locks(case.id)
        with self.client.pipeline(transaction=True) as pipe:
            for key in (case_key(case.id), locks_key(case.id), outcomes_key(case.id)):
                pipe.pexpire(key, self.retention_ms)
            pipe.execute()

    def _free_locks(self, case_id: str) -> None:
        """Drop this case's open-locks entries (never another case's)."""
        entry_prefix = case_id.encode() + b"|"
        for batch in self._lock_batches(case_id):
            keys = [lock.key for _, lock in batch]
            owners = cast("list[bytes | None]", self.client.hmget(OPEN_LOCKS, keys))
            mine = [
                k
                for k, o in zip(keys, owners, strict=True)
                if o is not None and o.startswith(entry_prefix)
            ]
            if mine:
                self.client.hdel(OPEN_LOCKS, *mine)

    def save_manifest(self, case: Case, evidence: dict[str, Any]) -> None:
        body = {
            "case_id": case.id,
            "created_ms": case.created_ms,
            "lock_count": case.lock_count,
            **evidence,
        }
        self.client.set(
            manifest_key(case.id), json.dumps(body, separators=(",", ":")), px=self.retention_ms
        )

    def manifest(self, case_id: str) -> dict[str, Any] | None:
        raw = self.client.get(manifest_key(case_id))
        return json.loads(raw) if raw else None


def _case(raw: dict[bytes, bytes], locks: list[bytes], outs: list[bytes | None]) -> Case:
    def text(name: str, default: str = "") -> str:
        v = raw.get(name.encode())
        return v.decode("utf-8", "replace") if v is not None else default

    decided = text("decided_ms")
    shown = tuple(CaseLock.from_json(json.loads(r)) for r in locks)
    counts = {k[2:].decode(): int(v) for k, v in raw.items() if k.startswith(b"n_") and int(v) > 0}
    return Case(
        id=text("id"),
        state=State(text("state")),
        created_ms=int(text("created_ms", "0")),
        expires_ms=int(text("expires_ms", "0")),
        locks=shown,
        lock_count=int(text("lock_count", "0")),
        decided_by=text("decided_by"),
        decided_ms=int(decided) if decided else None,
        decision_reason=text("decision_reason"),
        outcomes=tuple(
            {**parse_outcome(o), "key_hex": lock.key.hex()}
            for lock, o in zip(shown, outs, strict=False)
            if o is not None
        ),
        outcome_counts=counts,
        summary=json.loads(text("summary", "{}") or "{}"),
        dry_run=text("dry_run") == "1",
        approvals=tuple(_approval(line) for line in text("approvals").splitlines() if line),
    )


def _approval(line: str) -> tuple[str, int]:
    ms, _, who = line.partition(" ")
    return who, int(ms) if ms.isdigit() else 0
