"""The release scripts run pipelined, for the release and its verification. Each call comes back
as its decoded `Reply` or a sentence saying why not (never a raw Redis message: it can quote
arguments); nothing here raises for a Redis error. A `pacer` (the scan budget) waits after each
round trip, counted as server time.
"""

from __future__ import annotations

import re
import time
from contextlib import suppress

import redis
from redis.commands.core import Script
from redis.typing import EncodableT

from bot.core.layouts import decode_fields
from bot.core.model import HASH_LAYOUTS, TOKEN_LAYOUTS, Layout, Reason
from bot.core.pacing import Pacer, unpaced
from bot.core.tenures import REARM_SLACK_MS
from bot.release.outcome import ApprovedLock, Recording
from bot.release.reply import UNEXPECTED, Reply
from bot.release.scripts import COUNTER_LUA, HASH_LUA, STRING_LUA, Code
from bot.release.waiters import SIGNAL_EXPIRE_MS, signal_key, wake_channel
from bot.store import slots

#: Scripts per round trip: Redis runs one socket read's commands before serving anyone else, and
#: 32 calls hold it about 0.5 ms.
PIPELINE_CALLS = 32
#: The lock, its case context (None: nothing recorded or published), the op (del|delay|check).
Call = tuple[ApprovedLock, Recording | None, str]


class ScriptRunner:
    """The scripts on one client with one lock-delay grace (None: the locks are deleted)."""

    def __init__(
        self, client: redis.Redis, grace_ms: int | None = None, pacer: Pacer | None = None
    ) -> None:
        if grace_ms is not None and grace_ms <= 0:
            raise ValueError("grace_ms must be a positive number of milliseconds, or None")
        self.client = client
        self.grace_ms = grace_ms
        self._string = client.register_script(STRING_LUA)
        self._hash = client.register_script(HASH_LUA)
        self._counter = client.register_script(COUNTER_LUA)
        self.cluster = slots.is_cluster(client)
        self.pacer = pacer or unpaced()

    def run(self, calls: list[Call]) -> list[Reply | str]:
        out: list[Reply | str | None] = [None] * len(calls)
        runnable = []
        for i, (target, _, _) in enumerate(calls):
            problem = _unreleasable(target)
            if problem:
                out[i] = problem
            else:
                runnable.append(i)
        if runnable:
            queued = [self._call(*calls[i]) for i in runnable]
            raw: list[object] = []
            for start in range(0, len(queued), PIPELINE_CALLS):
                raw += self._pipelined(queued[start : start + PIPELINE_CALLS])
            for n, (r, (script, keys, args)) in enumerate(zip(raw, queued, strict=True)):
                if isinstance(r, redis.exceptions.NoScriptError):  # a node restarted, failed over
                    try:
                        raw[n] = script(keys=keys, args=args)  # loads it there, then runs it
                    except redis.RedisError as exc:
                        raw[n] = exc
            for i, r in zip(runnable, raw, strict=True):
                if isinstance(r, redis.RedisError):
                    out[i] = f"not released: {describe_error(r)}"
                else:
                    out[i] = Reply.decode(r) or f"not released: {UNEXPECTED}"
            if self.cluster:
                self._signal([calls[i][0] for i in runnable if _deleted(out[i])])
        return [o if o is not None else "not released" for o in out]

    def _pipelined(
        self, queued: list[tuple[Script, list[bytes], list[EncodableT]]]
    ) -> list[object]:
        """One round trip: each call's raw reply or its error; then the budget's wait."""
        started = time.perf_counter()
        try:
            with self.client.pipeline(transaction=False) as pipe:
                for script, keys, args in queued:
                    if self.cluster:  # Script objects refuse cluster pipelines
                        pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
                    else:
                        script(keys=keys, args=args, client=pipe)
                raw: list[object] = list(pipe.execute(raise_on_error=False))
        except redis.RedisError as exc:
            raw = [exc] * len(queued)
        self.pacer.pause(time.perf_counter() - started)
        return raw

    def _signal(self, targets: list[ApprovedLock]) -> None:
        """On a Redis Cluster python-redis-lock's `lock-signal:` list is in another slot than its
        lock: pushed here, only after the compare-and-delete succeeded (lost: a waiter waits for
        its own timeout)."""
        signals = [s for s in map(signal_key, targets) if s is not None]
        if not signals:
            return
        with suppress(redis.RedisError), self.client.pipeline(transaction=False) as pipe:
            for s in signals:
                pipe.delete(s)
                pipe.lpush(s, 1)
                pipe.pexpire(s, SIGNAL_EXPIRE_MS)
            pipe.execute(raise_on_error=False)

    def _call(
        self, target: ApprovedLock, rec: Recording | None, op: str
    ) -> tuple[Script, list[bytes], list[EncodableT]]:
        signal = signal_key(target)
        keys: list[bytes]
        if self.cluster:  # one slot per script: the lock and its receipt (see `_signal`)
            keys = [target.key, rec.receipt_key, rec.receipt_key] if rec else [target.key]
        else:
            # Without a case (verification) KEYS[2] and KEYS[3] are never touched: the lock's
            # own key stands in for them, not b"", which no ACL key pattern but `~*` allows
            # (Redis checks every key a script declares against the user's key patterns).
            keys = [
                target.key,
                *((rec.outcomes_key, rec.case_key) if rec else (target.key, target.key)),
            ]
            if signal is not None and op != "check":
                keys.append(signal)
        channel, message = wake_channel(target)
        args: list[EncodableT] = [
            op,
            rec.index if rec else "",
            target.ttl_ms,
            target.observed_ms,
            REARM_SLACK_MS,
            self.grace_ms or 0,
            rec.channel if rec else "",
            rec.event_prefix if rec else "",
            channel,
            message,
            SIGNAL_EXPIRE_MS,
        ]
        if target.layout in TOKEN_LAYOUTS:
            return self._string, list(keys), [*args, target.identity]
        if target.layout in HASH_LAYOUTS:
            pairs = [x for pair in decode_fields(target.identity) for x in pair]
            return self._hash, list(keys), [*args, *pairs]
        grow = "1" if target.reason is Reason.KEPT_ALIVE_BY_CONTENDERS else "0"
        assert target.counter is not None  # _unreleasable() checked it
        return self._counter, list(keys), [*args, target.counter, grow]


def _deleted(reply: Reply | str | None) -> bool:
    return isinstance(reply, Reply) and reply.code is Code.DELETED


def _unreleasable(target: ApprovedLock) -> str:
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
