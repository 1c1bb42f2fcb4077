"""`GET /healthz` over a fleet: 200 while some targets are down (its JSON says which), 503 only
when lockguard itself cannot work.

    route = fleet_health_route(check)    # check() -> [TargetHealth(name, labels, report), ...]

The body: `status`, `reasons`, and `targets`, one entry per target in the fleet's order:
`{"name", "labels", "up", ...that target's own /healthz body (bot.ops.health.HealthReport)}`.

- `ok` (200): every target's Redis answers and its scans are not overdue.
- `degraded` (200): some target is down or its scans are overdue, and lockguard still works for
  the others; `reasons` names each (`orders: redis: unreachable`). One Redis down is that
  target's alarm (its `lockguard_target_up` is 0), not a reason to restart lockguard.
- `unhealthy` (503): no target's Redis answers, or every target whose Redis answers has its
  scans overdue (the schedules themselves are stuck, or every scan fails): restarting lockguard
  or calling someone is the right thing then.

Never a secret, an address or Redis's own words: each entry is the target's report in
lockguard's words, as for one Redis.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.http.routes import Request, Response, Route
from bot.ops.health import HEALTH_PATH, OVERDUE, HealthReport


@dataclass(frozen=True, slots=True)
class TargetHealth:
    """One target's health check, with the name and labels it is shown by."""

    name: str
    labels: Mapping[str, str]
    report: HealthReport

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "labels": dict(self.labels),
            "up": not self.report.redis_error,
            **self.report.to_json(),
        }


def fleet_health(targets: Sequence[TargetHealth]) -> tuple[int, dict[str, Any]]:
    """The HTTP status and the body of `/healthz` for these checks (see the module's rules)."""
    reasons = [f"{t.name}: {reason}" for t in targets for reason in t.report.reasons]
    answering = [t for t in targets if not t.report.redis_error]
    stuck = bool(answering) and all(t.report.scans == OVERDUE for t in answering)
    if not answering or stuck:
        status, code = "unhealthy", 503
        why = "no target's Redis answers" if not answering else "every target's scans are overdue"
        reasons = [why, *reasons]
    else:
        status, code = ("degraded" if reasons else "ok"), 200
    return code, {
        "status": status,
        "reasons": reasons,
        "targets": [t.to_json() for t in targets],
    }


def fleet_health_route(
    check: Callable[[], Sequence[TargetHealth]], path: str = HEALTH_PATH
) -> Route:
    """`GET /healthz` -> every target's check now (`check`, which runs them concurrently)."""

    def handle(request: Request) -> Response:
        code, body = fleet_health(check())
        return Response.json(code, body, {"Cache-Control": "no-store"})

    return Route("GET", path, handle)
