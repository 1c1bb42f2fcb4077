"""The fleet for terminals and scripts (pure): a target's text, its part of `scan --json` (the
one-Redis object with `name`, `redis`, `status`, `error` and `labels` first; empty `findings`
when it could not be scanned), and the line naming the targets not reached.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

from bot.report.scan import write_scan_json

#: `status` of a target's part: scanned, or not (then `error` says why).
OK, ERROR = "ok", "error"


def target_text(name: str, redis: str, labels: Mapping[str, str]) -> str:
    """`orders: redis://10.0.0.5:6379/0 (team=payments, env=prod)`: a target, for people."""
    shown = ", ".join(f"{k}={v}" for k, v in labels.items())  # printable, checked at load
    return f"{name}: {redis}" + (f" ({shown})" if shown else "")


def target_head(
    name: str,
    redis: str,
    labels: Mapping[str, str],
    error: str | None = None,
    head: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A target's part of `scan --json` without its findings (`head`: `scan_json_head`)."""
    out: dict[str, Any] = {
        "name": name,
        "redis": redis,
        "status": ERROR if error is not None else OK,
        "error": error,
        "labels": dict(labels),
    }
    for k, v in (head or {}).items():
        out.setdefault(k, v)
    return out


def write_fleet_scan_json(
    out: TextIO, parts: Iterable[tuple[Mapping[str, Any], Iterable[str]]]
) -> None:
    """`{"targets": [...]}` streamed, one already-encoded finding a line: memory stays flat."""
    out.write('{"targets": [\n')
    for i, (head, lines) in enumerate(parts):
        if i:
            out.write(",\n")
        write_scan_json(out, head, lines)
    out.write("]}\n")


def fleet_summary(names: Sequence[str], failed: Sequence[str], what: str = "scanned") -> str:
    """`3 target(s): 2 scanned; could not be scanned: dead (exit 3)`."""
    line = f"{len(names)} target(s): {len(names) - len(failed)} {what}"
    if failed:
        line += f"; could not be {what}: {', '.join(failed)} (exit 3)"
    return line


def fleet_errors_json(failed: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    """`errors` of `cases --json` / `audit --json` over a fleet: each target not reached."""
    return [{"target": name, "error": error} for name, error in failed]


def dumps(body: Mapping[str, Any]) -> str:
    return json.dumps(body, indent=1) + "\n"
