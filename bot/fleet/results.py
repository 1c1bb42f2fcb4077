"""The same work on every target at once, bounded, each target's failure its own.

`across(targets, work, concurrency)` runs `work(target)` on at most `concurrency` threads
(LOCKGUARD_TARGET_CONCURRENCY) and returns one `TargetResult` per target in the targets' order: its
value, or the one-line error its Redis gave (exit 3: down, timed out, refused; never a secret).
A dead target fails within its own Redis timeout on its own thread and never holds up the
others. Anything that is no Redis failure nor a LockguardError is a bug and is raised.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

import redis
from redis.exceptions import RedisClusterException

from bot.compose import build_engine, secrets_of
from bot.core.errors import ConfigError, LockguardError
from bot.engine import Engine
from bot.fleet.target import Target
from bot.store.connection import describe

T = TypeVar("T")


@dataclass(frozen=True)
class TargetResult(Generic[T]):
    """One target's part: `value` when its work finished, else `error` (never both)."""

    target: Target
    value: T | None = None
    error: LockguardError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def attempt(target: Target, work: Callable[[Target], T]) -> TargetResult[T]:
    """`work(target)`, its Redis failure (also one raised building its client) its error."""
    try:
        return TargetResult(target, value=work(target))
    except LockguardError as exc:
        return TargetResult(target, error=exc)
    except (redis.RedisError, RedisClusterException) as exc:
        return TargetResult(target, error=describe(exc, target.redis, secrets_of(target.settings)))


def across(
    targets: Sequence[Target], work: Callable[[Target], T], concurrency: int
) -> list[TargetResult[T]]:
    """`work` on each target, at most `concurrency` at once; outcomes in the targets' order."""
    if len(targets) == 1:
        return [attempt(targets[0], work)]
    pool = ThreadPoolExecutor(
        max_workers=max(1, min(concurrency, len(targets))), thread_name_prefix="lockguard-target"
    )
    try:
        futures = [pool.submit(attempt, t, work) for t in targets]
        return [f.result() for f in futures]
    finally:
        # Interrupted (Ctrl-C): the targets not started yet are not started; those running
        # finish (each ends its own scan cleanly, as one Redis's scan does).
        pool.shutdown(wait=True, cancel_futures=True)


def engine_of(target: Target) -> Engine:
    """The target's own Engine: its own client, patterns and state in its own Redis."""
    return build_engine(target.settings)


def fleet_secrets(targets: Sequence[Target]) -> tuple[str, ...]:
    """Every target's secrets (its password file's password, ...), scrubbed from logs."""
    out: list[str] = []
    for t in targets:
        out += [s for s in secrets_of(t.settings) if s not in out]
    return tuple(out)


def chosen(targets: Sequence[Target], name: str | None) -> list[Target]:
    """`--target NAME`: that target alone (all of them without a name), or ConfigError (exit 2)
    listing the names there are."""
    if name is None:
        return list(targets)
    found = [t for t in targets if t.name == name]
    if found:
        return found
    names = ", ".join(t.name for t in targets)
    where = (
        " (no LOCKGUARD_TARGETS_FILE: the one target is the environment's Redis)"
        if len(targets) == 1 and targets[0].implicit
        else ""
    )
    raise ConfigError(f"--target: no target named {name[:60]!r}; the targets are: {names}{where}")
