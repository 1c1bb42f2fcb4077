"""Approval cases in Redis: exactly what a human was shown, and what they decided.

A case holds, for every lock, the exact key bytes, layout, identity bytes, reason, age and TTL
that were shown (as hex in JSON, so nothing is lost), and moves through

    pending --approve--> approved --release--> released   (per-lock outcomes recorded)
            --reject---> rejected
            (past its expiry) expired                       (cannot be approved; rescan)

Every transition is one Lua script, so a double click, two approvers at once or two bot replicas
produce exactly one winner; the others are told who decided first.

Keys (see also the keyspace in `bot.store`):

| key                        | type | TTL               | holds |
|----------------------------|------|-------------------|-------|
| `lockguard:case:<id>`      | hash | retention once closed | state, times, actor, reason, `locks` JSON, `outcomes` JSON |
| `lockguard:cases`          | zset | none (trimmed)    | case id -> created ms: the listing |
| `lockguard:open-locks`     | hash | none              | lock key (exact bytes) -> `<case id>|<expires ms>` while a case is pending or approved |
| `lockguard:manifest:<id>`  | string | retention       | the quarantine manifest: what was found and the evidence, JSON |
"""

from __future__ import annotations

import enum
import json
import re
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import redis

from bot.display import escape
from bot.errors import CaseError
from bot.model import Finding, Layout, Reason
from bot.store import PREFIX

CASES = PREFIX + b"cases"
OPEN_LOCKS = PREFIX + b"open-locks"
CASE_ID = re.compile(r"LG-\d{6}-[0-9a-f]{6}")


class State(enum.StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    RELEASED = "released"


def case_key(case_id: str) -> bytes:
    return PREFIX + b"case:" + case_id.encode()


def manifest_key(case_id: str) -> bytes:
    return PREFIX + b"manifest:" + case_id.encode()


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
        return cls(key=f.key, layout=f.layout, identity=f.identity, reason=f.reason,
                   ttl_ms=f.ttl_ms, observed_ms=f.observed_ms, held_seconds=f.held_seconds,
                   owner=f.owner, counter=f.counter, type=f.type)

    def to_json(self) -> dict[str, Any]:
        return {
            "key_hex": self.key.hex(), "key": escape(self.key), "layout": self.layout.value,
            "identity_hex": self.identity.hex(), "reason": self.reason.value,
            "ttl_ms": self.ttl_ms, "observed_ms": self.observed_ms,
            "held_seconds": round(self.held_seconds, 3), "owner": self.owner,
            "counter": self.counter, "type": self.type,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CaseLock:
        return cls(key=bytes.fromhex(d["key_hex"]), layout=Layout(d["layout"]),
                   identity=bytes.fromhex(d["identity_hex"]), reason=Reason(d["reason"]),
                   ttl_ms=int(d["ttl_ms"]), observed_ms=int(d["observed_ms"]),
                   held_seconds=float(d["held_seconds"]), owner=d.get("owner", ""),
                   counter=d.get("counter"), type=d.get("type", "string"))


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    state: State
    created_ms: int
    expires_ms: int
    locks: tuple[CaseLock, ...]
    decided_by: str = ""
    decided_ms: int | None = None
    decision_reason: str = ""
    outcomes: tuple[dict[str, Any], ...] = field(default=())
    dry_run: bool = False

    def effective_state(self, now_ms: int) -> State:
        if self.state is State.PENDING and now_ms >= self.expires_ms:
            return State.EXPIRED
        return self.state


# KEYS[1] case hash, KEYS[2] open-locks hash, KEYS[3] cases zset
# ARGV[1] case id, ARGV[2] now ms, ARGV[3] expires ms, ARGV[4] retention ms, then per lock:
#   lock key, lock JSON
# Returns the number of locks put in the case: locks already in a live case (pending or approved,
# not expired) are left out; 0 means no case was created.
OPEN_LUA = """
local now = tonumber(ARGV[2])
local taken = {}
local kept = {}
for i = 5, #ARGV, 2 do
  local owner = redis.call('HGET', KEYS[2], ARGV[i])
  local live = false
  if owner then
    local sep = string.find(owner, '|', 1, true)
    if sep and tonumber(string.sub(owner, sep + 1)) > now then live = true end
  end
  if not live then kept[#kept+1] = ARGV[i+1]; taken[#taken+1] = ARGV[i] end
end
if #kept == 0 then return 0 end
local entry = ARGV[1] .. '|' .. ARGV[3]
for _, k in ipairs(taken) do redis.call('HSET', KEYS[2], k, entry) end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'state', 'pending', 'created_ms', ARGV[2],
           'expires_ms', ARGV[3], 'locks', '[' .. table.concat(kept, ',') .. ']')
redis.call('ZADD', KEYS[3], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[4]))
return #kept
"""

# KEYS[1] case hash. ARGV[1] expected state, ARGV[2] new state, ARGV[3] now ms, then field/value
# pairs to set with the new state. A pending case past its expiry becomes 'expired' first.
# Returns 'ok' when this call made the transition, else the state that stopped it ('missing'
# when there is no such case).
TRANSITION_LUA = """
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return 'missing' end
if st == 'pending' and tonumber(redis.call('HGET', KEYS[1], 'expires_ms')) <= tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 'state', 'expired')
  st = 'expired'
end
if st ~= ARGV[1] then return st end
redis.call('HSET', KEYS[1], 'state', ARGV[2])
for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i+1]) end
return 'ok'
"""


def new_case_id(now_ms: int) -> str:
    day = datetime.fromtimestamp(now_ms / 1000, tz=UTC).strftime("%y%m%d")
    return f"LG-{day}-{secrets.token_hex(3)}"


def check_case_id(text: str) -> str:
    case_id = text.strip()
    if not CASE_ID.fullmatch(case_id):
        raise CaseError(
            f"malformed case id {escape(case_id.encode(), 40)!r}: expected LG-YYMMDD-xxxxxx "
            "(as shown by `lockguard cases`)"
        )
    return case_id


class CaseStore:
    def __init__(self, client: redis.Redis, *, retention_ms: int) -> None:
        self.client = client
        self.retention_ms = retention_ms
        self._open = client.register_script(OPEN_LUA)
        self._transition = client.register_script(TRANSITION_LUA)

    def open(self, locks: list[CaseLock], now_ms: int, ttl_ms: int) -> Case | None:
        """A new pending case for the locks not already in a live case; None if none are left."""
        if not locks:
            return None
        case_id = new_case_id(now_ms)
        expires = now_ms + ttl_ms
        args: list[Any] = [case_id, now_ms, expires, self.retention_ms]
        for lock in locks:
            args += [lock.key, json.dumps(lock.to_json(), separators=(",", ":"))]
        n = int(self._open(keys=[case_key(case_id), OPEN_LOCKS, CASES], args=args))
        if n == 0:
            return None
        return self.get(case_id)

    def get(self, case_id: str) -> Case | None:
        raw = self.client.hgetall(case_key(case_id))
        if not raw:
            return None
        return _case(raw)

    def transition(self, case_id: str, expected: State, new: State, now_ms: int,
                   **fields: str | int) -> str:
        args: list[Any] = [expected.value, new.value, now_ms]
        for k, v in fields.items():
            args += [k, v]
        reply = self._transition(keys=[case_key(case_id)], args=args)
        return reply.decode() if isinstance(reply, bytes) else str(reply)

    def close(self, case: Case, now_ms: int) -> None:
        """A case reached a final state: its locks are free for new cases, and it and its
        manifest are kept for the retention period."""
        with self.client.pipeline(transaction=True) as pipe:
            for lock in case.locks:
                pipe.hdel(OPEN_LOCKS, lock.key)
            pipe.pexpire(case_key(case.id), self.retention_ms)
            pipe.execute()

    def save_manifest(self, case: Case, evidence: dict[str, Any]) -> None:
        body = {"case_id": case.id, "created_ms": case.created_ms,
                "locks": [lock.to_json() for lock in case.locks], **evidence}
        self.client.set(manifest_key(case.id), json.dumps(body, separators=(",", ":")),
                        px=self.retention_ms)

    def manifest(self, case_id: str) -> dict[str, Any] | None:
        raw = self.client.get(manifest_key(case_id))
        return json.loads(raw) if raw else None

    def recent(self, limit: int = 20) -> list[Case]:
        ids = self.client.zrevrange(CASES, 0, limit - 1)
        if not ids:
            return []
        with self.client.pipeline(transaction=False) as pipe:
            for i in ids:
                pipe.hgetall(case_key(i.decode()))
            rows = pipe.execute()
        return [_case(row) for row in rows if row]


def _case(raw: dict[bytes, bytes]) -> Case:
    def text(name: str, default: str = "") -> str:
        v = raw.get(name.encode())
        return v.decode("utf-8", "replace") if v is not None else default

    decided = text("decided_ms")
    return Case(
        id=text("id"),
        state=State(text("state")),
        created_ms=int(text("created_ms", "0")),
        expires_ms=int(text("expires_ms", "0")),
        locks=tuple(CaseLock.from_json(d) for d in json.loads(text("locks", "[]"))),
        decided_by=text("decided_by"),
        decided_ms=int(decided) if decided else None,
        decision_reason=text("decision_reason"),
        outcomes=tuple(json.loads(text("outcomes", "[]"))),
        dry_run=text("dry_run") == "1",
    )
