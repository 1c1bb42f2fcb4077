"""`GET /healthz` over a fleet: 200 while some targets are down (`degraded`, each named), 503
(`unhealthy`) only when lockguard itself cannot work: no target's Redis answers, no report is
fresh, or every answering target's scans are overdue. One Redis down is that target's alarm, not
a reason to restart lockguard.

Served from the check loop's last reports, never by asking the targets' Redis: `/healthz` is
unauthenticated and often open to a network, so polling it must not send commands to every
production Redis. A report older than `STALE_CHECKS` check periods counts as down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.core.display import duration
from bot.ops.health import OVERDUE, HealthReport

#: A report older than this many check periods is stale: its target counts as down.
STALE_CHECKS = 3
#: ...and never less than this (only test periods are that short).
STALE_FLOOR_S = 2.0
NOT_CHECKED = "not checked yet"


def stale_after(every_s: float) -> float:
    return max(STALE_CHECKS * every_s, STALE_FLOOR_S)


@dataclass(frozen=True, slots=True)
class TargetHealth:
    """`report` None before the first check; `age_s` None: just now."""

    name: str
    labels: Mapping[str, str]
    report: HealthReport | None
    age_s: float | None = None
    stale: bool = False

    @property
    def up(self) -> bool:
        """Its Redis answered a check recent enough to go by."""
        return self.report is not None and not self.stale and not self.report.redis_error

    @property
    def reasons(self) -> list[str]:
        if self.report is None:
            return [NOT_CHECKED]
        if self.stale:
            return [f"health check stale: the last was {duration(self.age_s or 0.0)} ago"]
        return self.report.reasons

    def to_json(self) -> dict[str, Any]:
        shown = self.report or HealthReport("", redis_error=NOT_CHECKED)
        out = {
            "name": self.name,
            "labels": dict(self.labels),
            "up": self.up,
            **shown.to_json(),
            "age_seconds": None if self.age_s is None else round(self.age_s, 3),
            "stale": self.stale,
        }
        if self.report is None or self.stale:
            out |= {"status": "unhealthy", "reasons": self.reasons}
        return out


def aged(
    name: str,
    labels: Mapping[str, str],
    last: tuple[HealthReport, float] | None,
    now: float,
    limit_s: float,
) -> TargetHealth:
    """`last`: the report and the monotonic time it was made (None: not checked yet)."""
    if last is None:
        return TargetHealth(name, labels, None)
    report, at = last
    age = max(now - at, 0.0)
    return TargetHealth(name, labels, report, age_s=age, stale=age > limit_s)


def fleet_health(
    targets: Sequence[TargetHealth], stale_after_s: float | None = None
) -> tuple[int, dict[str, Any]]:
    """The status and body of `/healthz` (the module's rules)."""
    reasons = [f"{t.name}: {reason}" for t in targets for reason in t.reasons]
    answering = [t for t in targets if t.up]
    stuck = bool(answering) and all(
        t.report is not None and t.report.scans == OVERDUE for t in answering
    )
    if not answering or stuck:
        status, code = "unhealthy", 503
        if stuck:
            why = "every target's scans are overdue"
        elif targets and all(t.report is None or t.stale for t in targets):
            why = "no target has a recent health check"
        else:
            why = "no target's Redis answers"
        reasons = [why, *reasons]
    else:
        status, code = ("degraded" if reasons else "ok"), 200
    return code, {
        "status": status,
        "reasons": reasons,
        "stale_after_seconds": stale_after_s,
        "targets": [t.to_json() for t in targets],
    }
