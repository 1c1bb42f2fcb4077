"""Approval cases in Redis (`CaseStore`): exactly what a human was shown (bytes as hex in JSON,
so nothing is lost), and what they decided. A case moves through

    opening --scan done--> pending --approve--> approved --release--> released | incomplete
                                   --reject---> rejected             (some lock errored: resume)
                                   (past its expiry) expired        (cannot be approved; rescan)

An `opening` case is being filled by a scan and cannot be decided; if that scan dies its keys
expire and its locks are free again. Every transition is one Lua script (`case_scripts`), so a
double click, two approvers or two replicas make exactly one winner; the others are told who
decided first. Keys: `bot.store.keyspace`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import redis

from bot.cases.case import (
    Case,
    CaseLock,
    State,
    case_from_hash,
    new_case_id,
    parse_outcome,
)
from bot.cases.case_scripts import (
    ADD_LUA,
    APPROVE_LUA,
    FINISH_LUA,
    HELD_BACK_LUA,
    RECORD_LUA,
    TRANSITION_LUA,
)
from bot.core.tenures import identity_digest
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

#: Locks of a case read (and released) per round trip.
BATCH = 500
#: Locks and outcomes loaded with a case for people to see; the rest are read in batches.
PREVIEW = 50
#: An opening case whose scan sends no batch for this long has died: its keys expire.
OPENING_TTL_MS = 120_000
#: The case record's format (`v`): records of another format are not read as cases.
FORMAT = b"2"


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
        self._held_back = client.register_script(HELD_BACK_LUA)
        self._finish = client.register_script(FINISH_LUA)
        self._transition = client.register_script(TRANSITION_LUA)
        self._approve = client.register_script(APPROVE_LUA)
        self._record = client.register_script(RECORD_LUA)

    def add(self, case_id: str, locks: list[CaseLock], now_ms: int, expires_ms: int) -> Added:
        """These locks into the opening case (created by the first), save those in another live
        case or rejected with the same identity."""
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

    def held_back(self, lock: CaseLock, case_id: str, now_ms: int) -> str:
        """Why `add` would leave `lock` out now ("in_case", "snoozed", "self"), or "": its own
        rule, read only (asked before an oversized key is read whole)."""
        digest = identity_digest(lock.identity).hex()
        why = self._held_back(
            keys=[OPEN_LOCKS, REJECTIONS], args=[CASE_PREFIX, case_id, now_ms, lock.key, digest]
        )
        text = why.decode() if isinstance(why, bytes) else str(why)
        return "" if text == "expired" else text

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

    def get(self, case_id: str) -> Case | None:
        with self.client.pipeline(transaction=False) as pipe:
            pipe.hgetall(case_key(case_id))
            pipe.lrange(locks_key(case_id), 0, PREVIEW - 1)
            pipe.hmget(outcomes_key(case_id), [str(i) for i in range(PREVIEW)])
            raw, locks, outs = pipe.execute()
        if not raw or raw.get(b"v") != FORMAT:
            return None  # none, or written by a version before format 2: lapses by itself
        return case_from_hash(raw, locks, outs)

    def locks(self, case_id: str) -> Iterator[list[tuple[int, CaseLock]]]:
        """Every lock of the case with its index, BATCH at a time."""
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

    def close(self, case: Case, now_ms: int) -> None:
        """A final state: its locks are free for new cases (rejected ones stay snoozed), the case
        kept for the retention."""
        self._free_locks(case.id)
        with self.client.pipeline(transaction=True) as pipe:
            for key in (case_key(case.id), locks_key(case.id), outcomes_key(case.id)):
                pipe.pexpire(key, self.retention_ms)
            pipe.execute()

    def _free_locks(self, case_id: str) -> None:
        """Drop this case's open-locks entries (never another case's)."""
        entry_prefix = case_id.encode() + b"|"
        for batch in self.locks(case_id):
            keys = [lock.key for _, lock in batch]
            owners = cast("list[bytes | None]", self.client.hmget(OPEN_LOCKS, keys))
            mine = [
                k
                for k, o in zip(keys, owners, strict=True)
                if o is not None and o.startswith(entry_prefix)
            ]
            if mine:
                self.client.hdel(OPEN_LOCKS, *mine)


def snooze(store: CaseStore, case_id: str, until_ms: int) -> None:
    """None of the case's locks is proposed again with the same identity before `until_ms`."""
    for batch in store.locks(case_id):
        store.client.hset(
            REJECTIONS,
            mapping={
                lock.key: f"{identity_digest(lock.identity).hex()}|{until_ms}|{case_id}"
                for _, lock in batch
            },
        )


def save_manifest(
    client: redis.Redis, case: Case, evidence: dict[str, Any], retention_ms: int
) -> None:
    """What a case just opened found, kept for the retention."""
    body = {
        "case_id": case.id,
        "created_ms": case.created_ms,
        "lock_count": case.lock_count,
        **evidence,
    }
    client.set(manifest_key(case.id), json.dumps(body, separators=(",", ":")), px=retention_ms)


def manifest(client: redis.Redis, case_id: str) -> dict[str, Any] | None:
    raw = client.get(manifest_key(case_id))
    return json.loads(raw) if raw else None
