"""The same work on every target at once, bounded, each target's failure its own, and how the
results are shown.

A dead target fails within its own Redis timeout on its own thread and never holds up the others;
anything that is neither a Redis failure nor a LockguardError is a bug and is raised. Without a
targets file (`alone`) the output is one Redis's: no heading, no summary, no `target` nor `errors`
in JSON, and its failure is the command's error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TextIO, TypeVar

from bot.compose import build_engine, secrets_of
from bot.core.errors import ConfigError, LockguardError
from bot.engine import Engine
from bot.fleet.target import Target
from bot.report.scan import write_scan_json
from bot.report.target_text import (
    dumps,
    fleet_errors_json,
    fleet_summary,
    target_head,
    target_text,
    write_fleet_scan_json,
)
from bot.store.connection import describe
from bot.store.redis_errors import REDIS_FAILURES

T = TypeVar("T")
EXIT_OK, EXIT_REDIS = 0, 3


@dataclass(frozen=True)
class TargetResult(Generic[T]):
    """One target's part: `value` when its work finished, else `error`."""

    target: Target
    value: T | None = None
    error: LockguardError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def attempt(target: Target, work: Callable[[Target], T]) -> TargetResult[T]:
    """`work(target)`; its Redis failure (building its client too) is its error."""
    try:
        return TargetResult(target, value=work(target))
    except LockguardError as exc:
        return TargetResult(target, error=exc)
    except REDIS_FAILURES as exc:
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
        # Ctrl-C: targets not started are not started; those running end their scans cleanly.
        pool.shutdown(wait=True, cancel_futures=True)


def engine_of(target: Target) -> Engine:
    return build_engine(target.settings)


def fleet_secrets(targets: Sequence[Target]) -> tuple[str, ...]:
    """Every target's secrets (its password file's password, ...), scrubbed from logs."""
    out: list[str] = []
    for t in targets:
        out += [s for s in secrets_of(t.settings) if s not in out]
    return tuple(out)


def chosen(targets: Sequence[Target], name: str | None) -> list[Target]:
    """`--target NAME`: that target alone (all without a name), or ConfigError naming them all."""
    if name is None:
        return list(targets)
    found = [t for t in targets if t.name == name]
    if found:
        return found
    names = ", ".join(t.name for t in targets)
    where = " (no LOCKGUARD_TARGETS_FILE: the one target is the environment's Redis)"
    raise ConfigError(
        f"--target: no target named {name[:60]!r}; the targets are: {names}"
        + (where if alone(targets) else "")
    )


def alone(targets: Sequence[Target]) -> bool:
    """No targets file: the one implicit target. The one place the CLI's output tells them apart."""
    return len(targets) == 1 and targets[0].implicit


def _alone(done: Sequence[TargetResult[T]]) -> T | None:
    """The one target's value when `alone` (its failure raised), else None (no work of the
    CLI's has None for a value)."""
    if not alone([o.target for o in done]):
        return None
    if done[0].error is not None:
        raise done[0].error
    return done[0].value


def write_sections(
    out: TextIO, done: Sequence[TargetResult[T]], body: Callable[[T], str], what: str
) -> int:
    """Text over the fleet: per target a heading and its `body` (or why it failed), then how many
    were `what`. Exit 3 when any failed, else 0."""
    value = _alone(done)
    if value is not None:
        out.write(body(value) + "\n")
        return EXIT_OK
    for o in done:
        out.write(f"== {target_text(o.target.name, o.target.redis, o.target.labels)}\n")
        out.write((body(o.value) if o.value is not None else f"error: {o.error}") + "\n\n")
    failed = [o.target.name for o in done if not o.ok]
    out.write(fleet_summary([o.target.name for o in done], failed, what) + "\n")
    return EXIT_REDIS if failed else EXIT_OK


def write_rows(
    out: TextIO,
    done: Sequence[TargetResult[Any]],
    key: str,
    rows: Iterable[tuple[str, dict[str, Any]]],
) -> int:
    """JSON over the fleet: `{key: [...], "errors": [...]}`, each row naming its `target`. Exit 3
    when any failed, else 0."""
    if _alone(done) is not None:
        out.write(dumps({key: [row for _, row in rows]}))
        return EXIT_OK
    failed = [(o.target.name, str(o.error)) for o in done if not o.ok]
    listed = [row | {"target": name} for name, row in rows]
    out.write(dumps({key: listed, "errors": fleet_errors_json(failed)}))
    return EXIT_REDIS if failed else EXIT_OK


#: A target's `scan --json`: its summary, its findings' JSON lines, how many findings.
ScanParts = tuple[dict[str, Any], Iterable[str], int]


def write_scans(out: TextIO, done: Sequence[TargetResult[ScanParts]]) -> None:
    value = _alone(done)
    if value is not None:
        write_scan_json(out, value[0], value[1])
        return

    def part(o: TargetResult[ScanParts]) -> tuple[Mapping[str, Any], Iterable[str]]:
        t = o.target
        if o.value is None:
            return target_head(t.name, t.redis, t.labels, error=str(o.error)), ()
        return target_head(t.name, t.redis, t.labels, head=o.value[0]), o.value[1]

    write_fleet_scan_json(out, (part(o) for o in done))


def target_line(target: Target) -> str:
    """`target orders: redis://...` before what a case command shows (none when `alone`)."""
    if alone([target]):
        return ""
    return f"target {target_text(target.name, target.redis, target.labels)}\n"
