"""Release approved locks: a compare-and-delete on the exact approved bytes, then verify and wake.

One Lua script per layout family (string tokens, Redisson-style hashes, counters), each registered
once per `Releaser` (redis-py's `Script`: EVALSHA, with a SCRIPT LOAD on NOSCRIPT). Every script
compares what it finds with what the human approved and only then deletes, all in one atomic step:
a lock re-acquired since the scan is skipped and left untouched, a lock whose owner started
renewing it again (its TTL re-armed since the approved reading) is left alone as "recovered".

Why always Lua, never `DELEX key IFEQ value` (Redis 8.4+): DELEX compares the value only, while the
"recovered" check also needs the TTL and the server's `TIME` in the same atomic step; the script
does both on every server version (our test server is 7.0), so there is one code path to trust.

With `grace_ms` ("lock-delay", Chubby/Consul style, research §13.5) the script shortens the TTL
instead of deleting, guarded by the same compare, and never lengthens it.

Return codes never leave this module: `_Code` maps them to `Outcome`.
"""

from __future__ import annotations

import enum
import hashlib
import re
from dataclasses import dataclass, replace

import redis

from bot.display import escape
from bot.layouts import SHA1_IDENTITY_PREFIX
from bot.leases import REARM_SLACK_MS
from bot.model import HASH_LAYOUTS, TOKEN_LAYOUTS, Layout

#: python-redis-lock's own `signal_expire` default: how long the wake-up element may wait.
SIGNAL_EXPIRE_MS = 1000

_LUA_COMMON = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Was the TTL re-armed since the approved reading? Returns why ('' = no) and the expected PTTL.
local function renewed(pttl, approved, observed, slack)
  if approved < 0 then
    if pttl >= 0 then return 'expiry_added', -1 end
    return '', -1
  end
  local expected = approved - (now_ms() - observed)
  if pttl < 0 then return 'expiry_removed', expected end
  if pttl > expected + slack then return 'rearmed', expected end
  return '', expected
end
-- Lock-delay: shorten the TTL to grace ms, never lengthen it.
local function delay(key, pttl, grace)
  if pttl >= 0 and pttl <= grace then return {3, pttl, '', 0} end
  redis.call('PEXPIRE', key, grace)
  return {2, grace, '', 0}
end
-- After a successful compare: 'check' reports, a re-armed TTL stops it, 'delay' shortens the
-- TTL, 'del' deletes. Returns the reply, or nil when the key was deleted.
local function act(key, op, approved, observed, slack, grace)
  local pttl = redis.call('PTTL', key)
  if op == 'check' then return {4, pttl, '', 0} end
  local why, expected = renewed(pttl, approved, observed, slack)
  if why ~= '' then return {-2, pttl, why, expected} end
  if op == 'delay' then return delay(key, pttl, grace) end
  redis.call('DEL', key)
  return nil
end
"""

#: Reply of every script: {code, pttl ms, why, number}. Codes:
#:  1 deleted; 2 lock-delay: TTL set to grace; 3 lock-delay: TTL already <= grace, left as is;
#:  4 (op 'check') the approved holder is still there; 0 key missing;
#: -1 changed since approval (why: 'type' | 'value' | 'field' | 'extra' | 'integer' | 'count');
#: -2 same holder, TTL re-armed since approval (why: 'rearmed' | 'expiry_added' |
#:    'expiry_removed', number = the PTTL the approved reading predicts).
#: Ops (ARGV[1]): 'del' deletes, 'delay' shortens the TTL, 'check' (verify) changes nothing and
#: skips the re-arm test.

STRING_RELEASE_LUA = _LUA_COMMON + """
-- KEYS[1]: the lock (string). KEYS[2], optional: python-redis-lock's signal list, which gets
--   exactly its own UNLOCK_SCRIPT's wake-up after a delete (DEL; LPUSH 1; PEXPIRE ARGV[7]).
--   On a cluster both keys share a slot only when NAME carries a hash tag; lockguard targets a
--   single Redis, so they go together here.
-- ARGV[1]: op. ARGV[2]: the approved value, exact bytes, or 'sha1:' + 40 lower-case hex of it
--   (values over the scanner's limit; needs redis.sha1hex, which the caller checks).
-- ARGV[3]: approved PTTL ms (-1: no expiry), ARGV[4]: server ms of that reading,
-- ARGV[5]: re-arm slack ms, ARGV[6]: grace ms (op 'delay'), ARGV[7]: signal list expiry ms.
-- Reply: {code, pttl, why, number}, see bot/release.py.
local k = KEYS[1]
local t = redis.call('TYPE', k)['ok']
if t == 'none' then return {0, -2, '', 0} end
if t ~= 'string' then return {-1, -2, 'type', 0} end
local v = redis.call('GET', k)
local want = ARGV[2]
local same = (v == want)
if not same and #want == 45 and string.sub(want, 1, 5) == 'sha1:' and redis.sha1hex then
  same = (redis.sha1hex(v) == string.sub(want, 6))
end
if not same then return {-1, -2, 'value', 0} end
local r = act(k, ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]),
              tonumber(ARGV[6]))
if r then return r end
if KEYS[2] then
  redis.call('DEL', KEYS[2])
  redis.call('LPUSH', KEYS[2], 1)
  redis.call('PEXPIRE', KEYS[2], ARGV[7])
end
return {1, -2, '', 0}
"""

HASH_RELEASE_LUA = _LUA_COMMON + """
-- KEYS[1]: the lock (hash: Redisson RLock / RW lock, or any hash).
-- ARGV[1]: op, ARGV[2]: approved PTTL ms (-1: none), ARGV[3]: server ms of that reading,
-- ARGV[4]: re-arm slack ms, ARGV[5]: grace ms (op 'delay'),
-- ARGV[6]: a non-holder field the hash may also carry ('mode' for RW locks; '' for none),
-- ARGV[7..]: every approved holder field. All must exist, and no other holder may have joined;
-- then the whole key goes (never HINCRBY -1: every reentrant hold of a dead owner is stale).
-- Reply: {code, pttl, why, number}, see bot/release.py.
local k = KEYS[1]
local t = redis.call('TYPE', k)['ok']
if t == 'none' then return {0, -2, '', 0} end
if t ~= 'hash' then return {-1, -2, 'type', 0} end
local n = 0
for i = 7, #ARGV do
  if redis.call('HEXISTS', k, ARGV[i]) == 0 then return {-1, -2, 'field', 0} end
  n = n + 1
end
if ARGV[6] ~= '' then n = n + redis.call('HEXISTS', k, ARGV[6]) end
if redis.call('HLEN', k) ~= n then return {-1, -2, 'extra', 0} end
return act(k, ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]),
           tonumber(ARGV[5])) or {1, -2, '', 0}
"""

COUNTER_RELEASE_LUA = _LUA_COMMON + """
-- KEYS[1]: the counter lock (INCR + EXPIRE, no token). ARGV[1]: op, ARGV[2]: the approved count,
-- ARGV[3]: grace ms (op 'delay'). Acts only while the key is still an integer and its count is
-- at least the approved one (a lower count means it was deleted and re-created). No re-arm test:
-- every contender re-arms the TTL, which is exactly how such a lock is kept alive.
-- Reply: {code, pttl, why, number = the current count}, see bot/release.py.
local k = KEYS[1]
local t = redis.call('TYPE', k)['ok']
if t == 'none' then return {0, -2, '', 0} end
if t ~= 'string' then return {-1, -2, 'type', 0} end
local v = redis.call('GET', k)
if #v > 18 or not string.match(v, '^%-?%d+$') then return {-1, -2, 'integer', 0} end
local count = tonumber(v)
if count < tonumber(ARGV[2]) then return {-1, -2, 'count', count} end
local pttl = redis.call('PTTL', k)
if ARGV[1] == 'check' then return {4, pttl, '', count} end
if ARGV[1] == 'delay' then
  local r = delay(k, pttl, tonumber(ARGV[3]))
  r[4] = count
  return r
end
redis.call('DEL', k)
return {1, -2, '', count}
"""

_SERVER_HAS_SHA1HEX_LUA = "if redis.sha1hex then return 1 end return 0"


class Outcome(enum.StrEnum):
    RELEASED = "released"
    SKIPPED_REACQUIRED = "skipped_reacquired"
    ALREADY_GONE = "already_gone"
    RECOVERED = "recovered"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Target:
    """Exactly what the human approved (from the scan's Finding)."""

    key: bytes
    layout: Layout
    identity: bytes  # token; hashes: holder fields joined by b"\n"; counters: COUNTER_IDENTITY
    ttl_ms: int  # PTTL seen at the scan (-1: no expiry)
    observed_ms: int  # server time (ms) of that reading
    counter: int | None = None  # counter locks: the approved count


@dataclass(frozen=True, slots=True)
class Result:
    key: bytes
    outcome: Outcome
    detail: str  # one human sentence, no secrets
    now_ttl_ms: int | None = None  # lock-delay: the TTL the key has now


class _Code(enum.IntEnum):
    DELETED = 1
    DELAYED = 2
    DELAY_KEPT = 3
    MATCH = 4
    GONE = 0
    CHANGED = -1
    RENEWED = -2


@dataclass(frozen=True, slots=True)
class _Reply:
    code: _Code
    pttl: int
    why: str
    number: int


_CHANGED = {
    "type": "skipped: the key is now another type, so it was re-created since approval",
    "value": "skipped: re-acquired since approval (the value is no longer the approved token)",
    "field": "skipped: an approved holder field is gone, so it was re-acquired since approval",
    "extra": "skipped: another holder joined the lock since approval",
    "integer": "skipped: the value is no longer an integer counter, so it was re-created",
}
_REDIS_CODES = re.compile(
    r"\b(NOPERM|NOSCRIPT|BUSY|READONLY|OOM|WRONGTYPE|NOAUTH|WRONGPASS|MASTERDOWN|LOADING|"
    r"CROSSSLOT|MOVED|ASK|CLUSTERDOWN|TRYAGAIN|NOREPLICAS|EXECABORT|unknown command)\b"
)


# A script's ACL refusal reaches redis-py without its NOPERM code word.
_ACL_REFUSAL = re.compile(r"can't run this command|no permissions? to (run|access)")


class Releaser:
    """Runs the release of approved locks, one `Target` at a time; never raises for Redis errors."""

    def __init__(self, client: redis.Redis, *, grace_ms: int | None = None) -> None:
        if grace_ms is not None and grace_ms <= 0:
            raise ValueError("grace_ms must be a positive number of milliseconds, or None")
        self.client = client
        self.grace_ms = grace_ms
        self._string = client.register_script(STRING_RELEASE_LUA)
        self._hash = client.register_script(HASH_RELEASE_LUA)
        self._counter = client.register_script(COUNTER_RELEASE_LUA)
        self._has_sha1hex: bool | None = None  # fakeredis lacks redis.sha1hex; asked once
        self._signalled: set[bytes] = set()  # python-redis-lock keys woken by the release script

    # -- release -----------------------------------------------------------------------------

    def release(self, target: Target) -> Result:
        """Delete (or, with `grace_ms`, shorten the TTL of) the lock if it is still exactly what
        was approved. Never raises for Redis errors: those become `Outcome.ERROR`."""
        problem = _unreleasable(target)
        if problem:
            return Result(target.key, Outcome.ERROR, problem)
        op = "delay" if self.grace_ms is not None else "del"
        try:
            reply = self._run(target, op)
        except redis.RedisError as exc:
            return Result(target.key, Outcome.ERROR, f"not released: {_describe(exc)}")
        if reply is None:
            return Result(target.key, Outcome.ERROR, "not released: unexpected reply from Redis")
        if reply.code is _Code.DELETED and self._signal_key(target) is not None:
            self._signalled.add(target.key)
        return self._result(target, reply)

    def _result(self, target: Target, reply: _Reply) -> Result:
        key = target.key
        match reply.code:
            case _Code.DELETED:
                detail = "deleted: the approved holder still held it"
                if self._signal_key(target) is not None:
                    detail += ", and one blocked waiter was signalled"
                return Result(key, Outcome.RELEASED, detail)
            case _Code.DELAYED:
                return Result(key, Outcome.RELEASED,
                              f"lock-delay: TTL shortened to {reply.pttl} ms; the key expires "
                              "then unless its holder renews it", now_ttl_ms=reply.pttl)
            case _Code.DELAY_KEPT:
                return Result(key, Outcome.RELEASED,
                              f"lock-delay: TTL already {reply.pttl} ms, within the "
                              f"{self.grace_ms} ms grace, left as is", now_ttl_ms=reply.pttl)
            case _Code.GONE:
                return Result(key, Outcome.ALREADY_GONE, "already gone: the key no longer exists")
            case _Code.CHANGED:
                if reply.why == "count":
                    detail = (f"skipped: the count is {reply.number}, below the approved "
                              f"{target.counter}, so the key was deleted and re-created")
                else:
                    detail = _CHANGED.get(reply.why, "skipped: changed since approval")
                return Result(key, Outcome.SKIPPED_REACQUIRED, detail)
            case _Code.RENEWED:
                return Result(key, Outcome.RECOVERED, _renewed_detail(reply))
        return Result(key, Outcome.ERROR, "not released: unexpected reply from Redis")

    # -- verify ------------------------------------------------------------------------------

    def verify(self, target: Target, result: Result) -> Result:
        """Read the key back after a release. Absent, or (lock-delay) still the approved holder
        with a TTL within the grace: unchanged. A new holder: unchanged outcome, detail says so.
        The approved holder still there otherwise: `Outcome.ERROR`."""
        if result.outcome is not Outcome.RELEASED or _unreleasable(target):
            return result
        try:
            reply = self._run(target, "check")
        except redis.RedisError as exc:
            return replace(result, outcome=Outcome.ERROR,
                           detail=f"verification failed: could not read the key back "
                                  f"({_describe(exc)})")
        if reply is None:
            return replace(result, outcome=Outcome.ERROR,
                           detail="verification failed: unexpected reply from Redis")
        if reply.code is _Code.GONE:
            return result
        if reply.code is _Code.CHANGED:
            return replace(result, detail=f"{result.detail}; a new holder has acquired it since")
        if reply.code is _Code.MATCH:
            grace = self.grace_ms
            if grace is not None and 0 <= reply.pttl <= grace:
                return result
            ttl = "no expiry" if reply.pttl < 0 else f"a TTL of {reply.pttl} ms"
            if grace is not None:
                return replace(result, outcome=Outcome.ERROR,
                               detail=f"verification failed: the approved holder still holds it "
                                      f"with {ttl}, above the {grace} ms grace")
            return replace(result, outcome=Outcome.ERROR,
                           detail=f"verification failed: the approved holder still holds it "
                                  f"with {ttl} after the delete")
        return replace(result, outcome=Outcome.ERROR,
                       detail="verification failed: unexpected reply from Redis")

    # -- waiters -----------------------------------------------------------------------------

    def wake_waiters(self, target: Target) -> list[str]:
        """Wake the library's own waiters after a real delete (research §13.6); one line per
        action. Nothing in lock-delay mode (the key still exists) or for polling libraries."""
        if self.grace_ms is not None:
            return []
        try:
            signal = self._signal_key(target)
            if signal is not None:
                if target.key in self._signalled:
                    self._signalled.discard(target.key)
                else:
                    with self.client.pipeline(transaction=True) as pipe:
                        pipe.delete(signal)
                        pipe.lpush(signal, 1)
                        pipe.pexpire(signal, SIGNAL_EXPIRE_MS)
                        pipe.execute()
                return [f"python-redis-lock: pushed one wake-up onto {escape(signal)} "
                        "(one blocked waiter retries)"]
            if target.layout is Layout.REDISSON:
                channel = _redisson_name(b"redisson_lock__channel", target.key)
                n = self.client.publish(channel, 0)
                return [f"Redisson: published 0 on {escape(channel)} ({n} listening)"]
            if target.layout is Layout.REDISSON_RW:
                channel = _redisson_name(b"redisson_rwlock", target.key)
                n = self.client.publish(channel, 1)
                return [f"Redisson: published 1 on {escape(channel)} ({n} listening)"]
        except redis.RedisError as exc:
            return [f"could not wake waiters: {_describe(exc)}"]
        return []

    # -- helpers -----------------------------------------------------------------------------

    def _signal_key(self, target: Target) -> bytes | None:
        if target.layout is Layout.PYTHON_REDIS_LOCK and target.key.startswith(b"lock:"):
            return b"lock-signal:" + target.key[len(b"lock:"):]
        return None

    def _run(self, target: Target, op: str) -> _Reply | None:
        grace = self.grace_ms or 0
        if target.layout in TOKEN_LAYOUTS:
            keys = [target.key]
            signal = self._signal_key(target)
            if signal is not None:
                keys.append(signal)
            args = [op, self._string_identity(target), target.ttl_ms, target.observed_ms,
                    REARM_SLACK_MS, grace, SIGNAL_EXPIRE_MS]
            raw = self._string(keys=keys, args=args)
        elif target.layout in HASH_LAYOUTS:
            extra = b"mode" if target.layout is Layout.REDISSON_RW else b""
            args = [op, target.ttl_ms, target.observed_ms, REARM_SLACK_MS, grace, extra,
                    *target.identity.split(b"\n")]
            raw = self._hash(keys=[target.key], args=args)
        else:  # Layout.COUNTER; _unreleasable() has turned everything else away
            raw = self._counter(keys=[target.key], args=[op, target.counter, grace])
        return _parse(raw)

    def _string_identity(self, target: Target) -> bytes:
        """The identity as the string script compares it. A `sha1:` identity is passed through
        (lower-cased) where the server has redis.sha1hex; elsewhere (fakeredis) the value is read
        here, and if its SHA-1 matches, the script compares the exact bytes instead, so the
        compare-and-delete stays atomic either way."""
        ident = target.identity
        if not _is_sha1_identity(ident):
            return ident
        digest = ident[len(SHA1_IDENTITY_PREFIX):].lower()
        if self._has_sha1hex is None:
            self._has_sha1hex = bool(self.client.eval(_SERVER_HAS_SHA1HEX_LUA, 0))
        if self._has_sha1hex:
            return SHA1_IDENTITY_PREFIX + digest
        try:
            value = self.client.get(target.key)
        except redis.ResponseError:
            value = None  # not a string any more: the script reports it
        if value is not None and hashlib.sha1(value).hexdigest().encode() == digest:
            return value
        return ident  # matches nothing the key holds now: the script reports gone or changed


def _unreleasable(target: Target) -> str:
    """Why this target cannot be released at all ('' when it can)."""
    if target.layout is Layout.OTHER:
        return "not released: layout not releasable (lists, sets and other types are never deleted)"
    if target.layout is Layout.COUNTER and target.counter is None:
        return "not released: a counter lock needs the approved count"
    if target.layout in HASH_LAYOUTS and not target.identity:
        return "not released: no approved holder fields"
    if target.layout not in TOKEN_LAYOUTS | HASH_LAYOUTS | {Layout.COUNTER}:
        return "not released: layout not releasable"
    return ""


def _parse(raw: object) -> _Reply | None:
    if not isinstance(raw, list) or len(raw) != 4:
        return None
    try:
        code = _Code(int(raw[0]))
        why = raw[2].decode() if isinstance(raw[2], bytes) else str(raw[2])
        return _Reply(code, int(raw[1]), why, int(raw[3]))
    except (TypeError, ValueError):
        return None


def _renewed_detail(reply: _Reply) -> str:
    if reply.why == "expiry_added":
        return (f"recovered: an expiry ({reply.pttl} ms) was set on this lock since it was "
                "approved without one, so its owner looks alive; nothing changed")
    if reply.why == "expiry_removed":
        return ("recovered: the lock's expiry was removed since approval, so its owner looks "
                "alive; nothing changed")
    return (f"recovered: the same holder renewed it since approval (TTL {reply.pttl} ms, "
            f"about {max(reply.number, 0)} ms expected); nothing changed")


def _is_sha1_identity(ident: bytes) -> bool:
    hexpart = ident[len(SHA1_IDENTITY_PREFIX):]
    return (ident.startswith(SHA1_IDENTITY_PREFIX) and len(hexpart) == 40
            and all(c in b"0123456789abcdefABCDEF" for c in hexpart))


def _redisson_name(prefix: bytes, name: bytes) -> bytes:
    """Redisson's `prefixName`: braces (a hash tag) added unless the name already has one."""
    if b"{" in name:
        return prefix + b":" + name
    return prefix + b":{" + name + b"}"


def _describe(exc: redis.RedisError) -> str:
    """A short, secret-free account of a Redis failure (never the raw message: it can quote
    arguments)."""
    if isinstance(exc, redis.AuthenticationError):
        return "Redis refused the credentials"
    if isinstance(exc, redis.TimeoutError):
        return "Redis timed out"
    if isinstance(exc, redis.ConnectionError):
        return "Redis is unreachable"
    if isinstance(exc, redis.exceptions.NoPermissionError) or _ACL_REFUSAL.search(str(exc)):
        return "Redis refused it (NOPERM: the ACL user may not run this command)"
    if isinstance(exc, redis.ResponseError):
        m = _REDIS_CODES.search(str(exc))
        return f"Redis refused it ({m.group(1)})" if m else "Redis refused it"
    return f"Redis error ({type(exc).__name__})"
