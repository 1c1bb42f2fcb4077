"""Release approved locks: a compare-and-delete on the exact approved bytes, then verify.

The scripts (`bot.release_scripts`) compare what they find with what the human approved and only
then delete, all in one atomic step that also wakes the library's own waiters, publishes the
reclaim event and records the outcome in the case. A lock re-acquired since the scan is skipped
and left untouched; a lock whose owner started renewing it again (its TTL re-armed since the
approved reading) is left alone as "recovered".

Why always Lua, never `DELEX key IFEQ value` (Redis 8.4+): DELEX compares the value only, while the
"recovered" check also needs the TTL and the server's `TIME` in the same atomic step, and the
event and the outcome record must not be separable from the deletion.

With `grace_ms` ("lock-delay", Chubby/Consul style, research §13.5) the script shortens the TTL
instead of deleting, guarded by the same compare, never lengthens it, and publishes a
`lock_delayed` event.

Many locks go in one pipeline (`release_many`, `verify_many`): one round trip per batch.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace

import redis
from redis.typing import EncodableT

from bot.layouts import decode_fields
from bot.leases import REARM_SLACK_MS
from bot.model import HASH_LAYOUTS, TOKEN_LAYOUTS, Layout, Reason
from bot.release.scripts import COUNTER_LUA, HASH_LUA, STRING_LUA
from bot.release.waiters import signal_key, wake_channel, wake_lines

#: python-redis-lock's own `signal_expire` default: how long the wake-up element may wait.
SIGNAL_EXPIRE_MS = 1000


class Outcome(enum.StrEnum):
    RELEASED = "released"
    SKIPPED_REACQUIRED = "skipped_reacquired"
    ALREADY_GONE = "already_gone"
    RECOVERED = "recovered"
    #: lockguard's own records, read again at approval, do not show it as an abandoned lock.
    SKIPPED_UNPROVEN = "skipped_unproven"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Target:
    """Exactly what the human approved (from the scan's Finding)."""

    key: bytes
    layout: Layout
    identity: bytes  # token; hashes: `layouts.encode_fields` of every pair; counters: <counter>
    ttl_ms: int  # PTTL seen at the scan (-1: no expiry)
    observed_ms: int  # server time (ms) of that reading
    counter: int | None = None  # counter locks: the approved count
    reason: Reason | None = None  # kept_alive_by_contenders lets a counter keep counting


@dataclass(frozen=True, slots=True)
class Recording:
    """Where the script records the outcome and what it publishes: the case's context."""

    outcomes_key: bytes
    case_key: bytes
    index: int
    channel: str = ""  # '' publishes nothing
    event_prefix: str = ""  # the event JSON up to its time fields, ending in ','


@dataclass(frozen=True, slots=True)
class Result:
    key: bytes
    outcome: Outcome
    detail: str  # one human sentence, no secrets
    now_ttl_ms: int | None = None  # lock-delay: the TTL the key has now
    event_published: bool = False
    wake: tuple[str, ...] = ()
    #: Decided by an earlier run: its recorded outcome stands, nothing was done now.
    earlier: bool = False


class _Code(enum.IntEnum):
    DELETED = 1
    DELAYED = 2
    DELAY_KEPT = 3
    MATCH = 4
    EARLIER = 5
    GONE = 0
    CHANGED = -1
    RENEWED = -2
    REFUSED = -3


@dataclass(frozen=True, slots=True)
class _Reply:
    code: _Code
    pttl: int
    why: str
    number: int


_ACTED = (_Code.DELETED, _Code.DELAYED, _Code.DELAY_KEPT)
_CHANGED = {
    "type": "skipped: the key is now another type, so it was re-created since approval",
    "value": "skipped: re-acquired or changed since approval (not the approved value)",
    "field": "skipped: an approved holder field is gone, so it was re-acquired since approval",
    "extra": "skipped: another holder joined the lock since approval",
    "integer": "skipped: the value is no longer an integer counter, so it was re-created",
    "rearmed": "skipped: the count is unchanged but the TTL was re-armed, so it was re-created "
               "by a new owner or renewed by its holder since approval",
}


class Releaser:
    """Runs the release of approved locks; never raises for Redis errors (they become
    `Outcome.ERROR`)."""

    def __init__(self, client: redis.Redis, *, grace_ms: int | None = None) -> None:
        if grace_ms is not None and grace_ms <= 0:
            raise ValueError("grace_ms must be a positive number of milliseconds, or None")
        self.client = client
        self.grace_ms = grace_ms
        self._string = client.register_script(STRING_LUA)
        self._hash = client.register_script(HASH_LUA)
        self._counter = client.register_script(COUNTER_LUA)

    # -- release -----------------------------------------------------------------------------

    def release(self, target: Target, rec: Recording | None = None) -> Result:
        """Delete (or, with `grace_ms`, shorten the TTL of) the lock if it is still exactly what
        was approved."""
        return self.release_many([(target, rec)])[0]

    def release_many(self, items: list[tuple[Target, Recording | None]]) -> list[Result]:
        """One pipeline for many locks. If the connection fails mid-way, the locks whose
        replies were lost come back as errors: the caller re-reads their recorded outcomes."""
        op = "delay" if self.grace_ms is not None else "del"
        replies = self._run_many([(t, r, op) for t, r in items])
        out = []
        for (target, rec), reply in zip(items, replies, strict=True):
            result = self._result(target, reply)
            if (not isinstance(reply, str) and reply.code in _ACTED
                    and rec is not None and rec.channel):
                if reply.why == "event_refused":
                    result = replace(result, detail=result.detail + "; the reclaim event was "
                                     "NOT published: Redis refused PUBLISH on the release "
                                     "channel (ACL)")
                else:
                    result = replace(result, event_published=True)
            out.append(result)
        return out

    def _result(self, target: Target, reply: _Reply | str) -> Result:
        key = target.key
        if isinstance(reply, str):
            return Result(key, Outcome.ERROR, reply)
        match reply.code:
            case _Code.DELETED:
                return Result(key, Outcome.RELEASED, "deleted: the approved holder still held it",
                              wake=tuple(self.wake_lines(target)))
            case _Code.DELAYED:
                return Result(key, Outcome.RELEASED,
                              f"lock-delay: TTL shortened to {reply.pttl} ms; the key expires "
                              "then unless its holder renews it", now_ttl_ms=reply.pttl)
            case _Code.DELAY_KEPT:
                return Result(key, Outcome.RELEASED,
                              f"lock-delay: TTL already {reply.pttl} ms, within the "
                              f"{self.grace_ms} ms grace, left as is", now_ttl_ms=reply.pttl)
            case _Code.EARLIER:
                try:
                    earlier = Outcome(reply.why)
                except ValueError:
                    earlier = Outcome.ERROR
                return Result(key, earlier, f"decided by an earlier run: {reply.why}",
                              earlier=True)
            case _Code.GONE:
                return Result(key, Outcome.ALREADY_GONE, "already gone: the key no longer exists")
            case _Code.CHANGED:
                if reply.why == "count":
                    detail = (f"skipped: the count is {reply.number}, below the approved "
                              f"{target.counter}, so the key was deleted and re-created")
                elif reply.why == "count_grew":
                    detail = (f"skipped: the count grew to {reply.number} from the approved "
                              f"{target.counter}: someone is still using it")
                else:
                    detail = _CHANGED.get(reply.why, "skipped: changed since approval")
                return Result(key, Outcome.SKIPPED_REACQUIRED, detail)
            case _Code.RENEWED:
                return Result(key, Outcome.RECOVERED, _renewed_detail(reply))
            case _Code.REFUSED:
                return Result(key, Outcome.ERROR, "not released: Redis refused the delete "
                              "(NOPERM: the ACL user may not run DEL or PEXPIRE); nothing changed")
        return Result(key, Outcome.ERROR, "not released: unexpected reply from Redis")

    # -- verify ------------------------------------------------------------------------------

    def verify(self, target: Target, result: Result) -> Result:
        return self.verify_many([(target, result)])[0]

    def verify_many(self, items: list[tuple[Target, Result]]) -> list[Result]:
        """Read each released key back. Absent, or (lock-delay) still the approved holder with
        a TTL within the grace: unchanged. A new holder: unchanged outcome, detail says so. The
        approved holder still there otherwise: `Outcome.ERROR`."""
        todo = [(i, t) for i, (t, r) in enumerate(items)
                if r.outcome is Outcome.RELEASED and not r.earlier]
        out = [r for _, r in items]
        replies = self._run_many([(t, None, "check") for _, t in todo])
        for (i, _), reply in zip(todo, replies, strict=True):
            out[i] = self._verified(out[i], reply)
        return out

    def _verified(self, result: Result, reply: _Reply | str) -> Result:
        if isinstance(reply, str):
            return replace(result, outcome=Outcome.ERROR,
                           detail=f"verification failed: could not read the key back ({reply})")
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

    def wake_lines(self, target: Target) -> list[str]:
        """What the release script did to wake the library's own waiters (research §13.6)."""
        return wake_lines(target)

    # -- helpers -----------------------------------------------------------------------------

    def _run_many(self, calls: list[tuple[Target, Recording | None, str]]) -> list[_Reply | str]:
        """Each call's parsed reply, or a sentence saying why there is none."""
        out: list[_Reply | str | None] = [None] * len(calls)
        runnable = []
        for i, (target, _, _) in enumerate(calls):
            problem = _unreleasable(target)
            if problem:
                out[i] = problem
            else:
                runnable.append(i)
        if runnable:
            try:
                with self.client.pipeline(transaction=False) as pipe:
                    for i in runnable:
                        self._queue(pipe, *calls[i])
                    raw = pipe.execute(raise_on_error=False)
            except redis.RedisError as exc:
                raw = [exc] * len(runnable)
            for i, r in zip(runnable, raw, strict=True):
                if isinstance(r, redis.RedisError):
                    out[i] = f"not released: {describe_error(r)}"
                else:
                    out[i] = _parse(r) or "not released: unexpected reply from Redis"
        return [o if o is not None else "not released" for o in out]

    def _queue(self, pipe: redis.client.Pipeline, target: Target, rec: Recording | None,
               op: str) -> None:
        keys: list[bytes] = [target.key, rec.outcomes_key if rec else b"",
                             rec.case_key if rec else b""]
        signal = signal_key(target)
        if signal is not None and op != "check":
            keys.append(signal)
        channel, message = wake_channel(target)
        args: list[EncodableT] = [
            op, rec.index if rec else "", target.ttl_ms, target.observed_ms, REARM_SLACK_MS,
            self.grace_ms or 0, rec.channel if rec else "", rec.event_prefix if rec else "",
            channel, message, SIGNAL_EXPIRE_MS,
        ]
        if target.layout in TOKEN_LAYOUTS:
            self._string(keys=keys, args=[*args, target.identity], client=pipe)
        elif target.layout in HASH_LAYOUTS:
            pairs = [x for pair in decode_fields(target.identity) for x in pair]
            self._hash(keys=keys, args=[*args, *pairs], client=pipe)
        else:  # Layout.COUNTER; _unreleasable() has turned everything else away
            grow = "1" if target.reason is Reason.KEPT_ALIVE_BY_CONTENDERS else "0"
            assert target.counter is not None  # _unreleasable() checked it
            self._counter(keys=keys, args=[*args, target.counter, grow], client=pipe)


def _unreleasable(target: Target) -> str:
    """Why this target cannot be released at all ('' when it can)."""
    if target.layout is Layout.OTHER:
        return "not released: layout not releasable (lists, sets and other types are never deleted)"
    if target.layout is Layout.COUNTER and target.counter is None:
        return "not released: a counter lock needs the approved count"
    if target.layout in HASH_LAYOUTS:
        try:
            if not decode_fields(target.identity):
                return "not released: no approved holder fields"
        except ValueError:
            return "not released: the approved hash identity is malformed"
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


_REDIS_CODES = re.compile(
    r"\b(NOPERM|NOSCRIPT|BUSY|READONLY|OOM|WRONGTYPE|NOAUTH|WRONGPASS|MASTERDOWN|LOADING|"
    r"CROSSSLOT|MOVED|ASK|CLUSTERDOWN|TRYAGAIN|NOREPLICAS|EXECABORT|unknown command)\b"
)
# A script's ACL refusal reaches redis-py without its NOPERM code word.
_ACL_REFUSAL = re.compile(r"can't run this command|no permissions? to (run|access)")


def describe_error(exc: redis.RedisError) -> str:
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
