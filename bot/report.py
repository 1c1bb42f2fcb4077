"""Presentation for terminals and scripts (pure): findings as table rows and as JSON objects."""

from __future__ import annotations

from typing import Any

from bot.display import duration, escape, to_hex, ttl
from bot.engine import ScanResult
from bot.model import Finding, Layout, Reason

JSON_TEXT_LIMIT = 1024


def finding_json(f: Finding) -> dict[str, Any]:
    """The `scan --json` shape of one finding (DESIGN §4): text fields escaped, hex exact."""
    out: dict[str, Any] = {
        "key": escape(f.key, JSON_TEXT_LIMIT),
        "key_hex": to_hex(f.key),
        "type": f.type,
        "layout": f.layout.value,
        "reason": f.reason.value,
        "ttl_ms": f.ttl_ms,
        "held_seconds": round(f.held_seconds, 3),
        "idle_seconds": f.idle_seconds,
        "identity": escape(f.identity, JSON_TEXT_LIMIT),
        "identity_hex": to_hex(f.identity),
        "owner": f.owner,
        "observations": f.observations,
        "ttl_rearms": f.rearms,
        "releasable": f.releasable,
    }
    if f.counter is not None:
        out["counter"] = f.counter
    return out


def _layout_cell(f: Finding) -> str:
    if f.layout is Layout.COUNTER and f.counter is not None:
        return f"counter (n={f.counter})"
    return f.layout.value


def table(result: ScanResult, endpoint: str, patterns: list[str], limit_note: bool = True) -> str:
    lines = [
        f"lockguard scan of {endpoint}: {result.scanned} lock(s) matching "
        f"{', '.join(patterns)} in {result.duration_seconds:.2f}s",
    ]
    if not result.worst:
        lines.append("no locks found")
        return "\n".join(lines)
    rows = [("VERDICT", "HELD", "TTL", "IDLE", "LAYOUT", "KEY", "OWNER")]
    for f in result.worst:
        rows.append((
            f.reason.value,
            duration(f.held_seconds) + ("" if f.observations > 1 else "*"),
            ttl(f.ttl_ms),
            duration(f.idle_seconds) if f.idle_seconds >= 0 else "?",
            _layout_cell(f),
            escape(f.key, 48),
            (f.owner or escape(f.identity, 40))[:60],
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
    shown = len(result.worst)
    if result.scanned > shown and limit_note:
        lines.append(f"... {result.scanned - shown} more lock(s) not shown (use --limit or --json)")
    counts = ", ".join(
        f"{result.by_reason[r]} {r.value}" for r in Reason if result.by_reason.get(r)
    )
    lines.append(f"verdicts: {counts}; oldest held {duration(result.oldest_held_seconds)}")
    lines.append("* first seen this scan: its age is what the value says, or 0")
    return "\n".join(lines)
