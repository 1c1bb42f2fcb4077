"""`GET /healthz` over a fleet: 200 while some targets are down (its JSON says which), 503 only
when lockguard itself cannot work.

    status, body = fleet_health(targets, stale_after_s)   # [TargetHealth(name, labels, ...)]

Served from the check loop's last reports (`bot.serve.fleet_operations`), never by asking the
targets' Redis: `/healthz` is unauthenticated and often open to a whole network, so a script
polling it must not send commands to every production Redis. Each report carries its age; one
older than `STALE_CHECKS` check periods (the loop is stuck, or slower than it should be) counts
as down.

The body: `status`, `reasons`, `stale_after_seconds`, and `targets`, one entry per target in the
fleet's order: `{"name", "labels", "up", "age_seconds", "stale", ...that target's own /healthz
body (bot.ops.health.HealthReport)}`; `age_seconds` is null for a target not checked yet (which
counts as down, `not checked yet`).

- `ok` (200): every target's Redis answers and its scans are not overdue.
- `degraded` (200): some target is down or its scans are overdue, and lockguard still works for
  the others; `reasons` names each (`orders: redis: unreachable`). One Redis down is that
  target's alarm (its `lockguard_target_up` is 0), not a reason to restart lockguard.
- `unhealthy` (503): no target's Redis answers (or no report is fresh), or every target whose
  Redis answers has its scans overdue (the schedules themselves are stuck, or every scan
  fails): restarting lockguard or calling someone is the right thing then.

Never a secret, an address or Redis's own words: each entry is the target's report in
lockguard's words, as for one Redis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.core.display import duration
from bot.ops.health import OVERDUE, HealthReport

#: A report older than this many check periods is stale: its target counts as down.
STALE_CHECKS = 3
#: ...and never less than this many seconds (only very short test periods reach it).
STALE_FLOOR_S = 2.0
NOT_CHECKED = "not checked yet"


def stale_after(every_s: float) -> float:
    """Seconds after which a report of a loop checking every `every_s` seconds is stale."""
    return max(STALE_CHECKS * every_s, STALE_FLOOR_S)


@dataclass(frozen=True, slots=True)
class TargetHealth:
    """One target's last health check, with the name and labels it is shown by: `report` is
    None before its first check; `age_s` is how long ago it was made (None: just now)."""

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
    """A target's `last` report (and the monotonic time it was made) as seen at `now`: stale
    when older than `limit_s`; None: not checked yet."""
    if last is None:
        return TargetHealth(name, labels, None)
    report, at = last
    age = max(now - at, 0.0)
    return TargetHealth(name, labels, report, age_s=age, stale=age > limit_s)


def fleet_health(
    targets: Sequence[TargetHealth], stale_after_s: float | None = None
) -> tuple[int, dict[str, Any]]:
    """The HTTP status and the body of `/healthz` for these checks (see the module's rules)."""
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
