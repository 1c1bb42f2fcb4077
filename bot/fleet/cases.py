"""Cases and the audit log over the fleet: each target's own, read from its own Redis, each
marked with its target; and the one target a case id belongs to, so that `approve` and `reject`
act there and nowhere else.

A target that cannot be reached is named (`errors` in JSON, a line in text) and makes the exit 3;
the other targets' cases are still listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TextIO

from bot.cases.audit import AuditEntry
from bot.cases.case import Case, check_case_id
from bot.core.errors import CaseError, ConfigError, RedisUnavailableError
from bot.fleet.results import TargetResult, across, chosen, engine_of
from bot.fleet.target import Target
from bot.report import audit_text, case_json, case_text
from bot.report.fleet import (
    dumps,
    error_text,
    fleet_errors_json,
    fleet_summary,
    target_heading,
)

EXIT_OK, EXIT_REDIS = 0, 3


def _errors(done: Sequence[TargetResult[Any]]) -> list[tuple[str, str]]:
    return [(o.target.name, str(o.error)) for o in done if not o.ok]


def fleet_cases(
    targets: Sequence[Target], limit: int, as_json: bool, concurrency: int, out: TextIO
) -> int:
    """`cases` with a targets file: each target's `limit` most recent cases, each naming its
    target (`"target"` in JSON, a section per target in text)."""

    def recent(t: Target) -> tuple[list[Case], int]:
        engine = engine_of(t)
        return engine.cases(limit), engine.now_ms()

    done = across(targets, recent, concurrency)
    if as_json:
        listed = [
            {**case_json(c, o.value[1]), "target": o.target.name}
            for o in done
            if o.value is not None
            for c in o.value[0]
        ]
        out.write(dumps({"cases": listed, "errors": fleet_errors_json(_errors(done))}))
    else:
        for o in done:
            out.write(target_heading(o.target.name, o.target.redis, o.target.labels) + "\n")
            if o.value is None:
                out.write(error_text(str(o.error)) + "\n\n")
                continue
            found, now = o.value
            text = "\n".join(case_text(c, now) for c in found) if found else "no cases"
            out.write(text + "\n\n")
        failed = [name for name, _ in _errors(done)]
        out.write(fleet_summary([t.name for t in targets], failed, "read") + "\n")
    return EXIT_REDIS if _errors(done) else EXIT_OK


def case_target(
    targets: Sequence[Target], case_id: str, name: str | None, concurrency: int
) -> Target:
    """The target whose Redis holds case `case_id`: the one `--target` names, the one target
    there is, else the one target of the fleet that has it. ConfigError (exit 2) when more than
    one has it (`--target` says which), CaseError (exit 2) when none has it, and the targets that
    could not be asked (exit 3) when the case may be on one of them."""
    check_case_id(case_id)  # a malformed id is refused before any Redis is asked
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
    failed = _errors(done)
    if failed:
        raise RedisUnavailableError(
            f"no case {case_id} on the targets reached; it may be on one that could not be "
            "asked: " + "; ".join(f"{n}: {e}" for n, e in failed)
        )
    raise CaseError(
        f"no case {case_id} on any target (it may have passed its retention); see `lockguard cases`"
    )


def fleet_audit(
    targets: Sequence[Target],
    limit: int,
    case_id: str | None,
    as_json: bool,
    concurrency: int,
    out: TextIO,
) -> int:
    """`audit` with a targets file: the newest `limit` entries over the fleet, each naming its
    target (JSON, newest first), or a section per target (text)."""
    done = across(targets, lambda t: engine_of(t).audit(limit, case_id), concurrency)
    if as_json:
        merged: list[tuple[str, AuditEntry]] = sorted(
            ((o.target.name, e) for o in done if o.value is not None for e in o.value),
            key=lambda pair: pair[1].at_ms,
            reverse=True,
        )[:limit]
        entries = [audit_json(e) | {"target": name} for name, e in merged]
        out.write(dumps({"entries": entries, "errors": fleet_errors_json(_errors(done))}))
    else:
        for o in done:
            out.write(target_heading(o.target.name, o.target.redis, o.target.labels) + "\n")
            text = audit_text(o.value) if o.value is not None else error_text(str(o.error))
            out.write(text + "\n\n")
        failed = [name for name, _ in _errors(done)]
        out.write(fleet_summary([t.name for t in targets], failed, "read") + "\n")
    return EXIT_REDIS if _errors(done) else EXIT_OK


def audit_json(e: AuditEntry) -> dict[str, Any]:
    """An audit entry for `audit --json`."""
    return {
        "id": e.id,
        "event": e.event,
        "at_ms": e.at_ms,
        "case_id": e.case_id or None,
        "actor": e.actor or None,
        "data": e.data,
    }
