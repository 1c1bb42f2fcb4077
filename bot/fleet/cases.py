"""Cases and the audit log over the fleet, each from its own target's Redis and naming it; and the
one target a case id belongs to, so that `approve` and `reject` act there and nowhere else. A
target that cannot be reached is named and makes the exit 3; the others are still listed.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from typing import Any, TextIO

from bot.cases.audit import AuditEntry
from bot.cases.case import Case, check_case_id
from bot.core.errors import CaseError, ConfigError, RedisUnavailableError
from bot.core.invocation import command
from bot.engine import Engine
from bot.fleet.results import across, chosen, engine_of, target_line, write_rows, write_sections
from bot.fleet.target import Target
from bot.report import audit_text, case_json, case_text


def fleet_cases(
    targets: Sequence[Target], limit: int, as_json: bool, concurrency: int, out: TextIO
) -> int:
    def recent(t: Target) -> tuple[list[Case], int]:
        engine = engine_of(t)
        return engine.cases(limit), engine.now_ms()

    done = across(targets, recent, concurrency)
    if as_json:
        rows = [
            (o.target.name, case_json(c, o.value[1]))
            for o in done
            if o.value is not None
            for c in o.value[0]
        ]
        return write_rows(out, done, "cases", rows)
    return write_sections(out, done, lambda v: _cases_text(*v), "read")


def _cases_text(found: list[Case], now: int) -> str:
    if not found:
        return (
            "no cases: a scan opens one when a flagged lock may be offered for release "
            f"(`{command()} scan` says when)"
        )
    return "\n".join(case_text(c, now) for c in found)


def case_target(
    targets: Sequence[Target], case_id: str, name: str | None, concurrency: int
) -> Target:
    """The target holding case `case_id`: the one `--target` names, the only one, or the one that
    has it. Exit 2 when more than one or none has it; exit 3 when it may be on one not reached."""
    check_case_id(case_id)  # before any Redis is asked
    if name is not None or len(targets) == 1:
        return chosen(targets, name)[0]

    def has(t: Target) -> bool:
        try:
            engine_of(t).case(case_id)
        except CaseError:
            return False
        return True

    done = across(targets, has, concurrency)
    found = [o.target for o in done if o.value]
    if len(found) > 1:
        raise ConfigError(
            f"case {case_id} is on more than one target ({', '.join(t.name for t in found)}): "
            "say which with --target NAME"
        )
    if found:
        return found[0]
    failed = [(o.target.name, str(o.error)) for o in done if not o.ok]
    if failed:
        raise RedisUnavailableError(
            f"no case {case_id} on the targets reached; it may be on one that could not be "
            "asked: " + "; ".join(f"{n}: {e}" for n, e in failed)
        )
    raise CaseError(
        f"no case {case_id} on any target (it may have passed its retention); see `lockguard cases`"
    )


def case_engine(
    targets: Sequence[Target], case_id: str, name: str | None, concurrency: int, out: TextIO
) -> Engine:
    """The Engine of the target holding case `case_id`, after a line naming that target."""
    target = case_target(targets, case_id, name, concurrency)
    out.write(target_line(target))
    return engine_of(target)


def fleet_audit(
    targets: Sequence[Target],
    limit: int,
    case_id: str | None,
    as_json: bool,
    concurrency: int,
    out: TextIO,
) -> int:
    """`audit`: the newest `limit` entries over the fleet (JSON: the targets' logs merged, newest
    first), each naming its target."""
    done = across(targets, lambda t: engine_of(t).audit(limit, case_id), concurrency)
    if as_json:
        logs = [[(o.target.name, e) for e in o.value] for o in done if o.value is not None]
        merged = heapq.merge(*logs, key=lambda pair: pair[1].at_ms, reverse=True)
        rows = [(name, audit_json(e)) for name, e in itertools.islice(merged, limit)]
        return write_rows(out, done, "entries", rows)
    return write_sections(out, done, audit_text, "read")


def audit_json(e: AuditEntry) -> dict[str, Any]:
    return {
        "id": e.id,
        "event": e.event,
        "at_ms": e.at_ms,
        "case_id": e.case_id or None,
        "actor": e.actor or None,
        "data": e.data,
    }
