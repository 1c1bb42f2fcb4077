"""`POST /hooks/scan` over a fleet (`LOCKGUARD_TARGETS_FILE`): an alarm hook scans everything.

- `?target=NAME` (or a JSON body `{"target": "NAME"}`, `bot.ops.webhook.requested_target`):
  that target's scan only, answered `{"targets": [part]}`; its Redis down or a scan already
  running there is 503, as for one Redis; a name that is no target's is 400 `target: unknown
  target` (the name is not echoed), and so is a malformed one.
- no `target`: every target is scanned, at most `LOCKGUARD_TARGET_CONCURRENCY` at once, and
  one such sweep runs at a time (another is 503 with `Retry-After`, so threads stay bounded
  whoever calls); 200 `{"targets": [...]}`, each part `name`, `redis`, `status` (`ok` /
  `error`), `error`, `labels`, then that target's usual webhook summary (at most 100 findings);
  503 when no target could be scanned. A dead target never stalls the others: its part says
  why (`bot.fleet.results.across`).

Each target's scan is its own `Operations.webhook_scan` (its metrics, its channel's findings).
Without a targets file `FleetOperations.webhook` answers its one scan's summary instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bot.core.errors import RedisUnavailableError, ScanBusyError
from bot.fleet import Target
from bot.fleet.results import TargetResult, across
from bot.ops.http_server import Request
from bot.ops.webhook import TargetError, requested_target
from bot.report.target_text import target_head

Run = Callable[[], dict[str, Any]]


def fleet_webhook(
    targets: Sequence[Target], runs: Mapping[str, Run], concurrency: int
) -> Callable[[Request], dict[str, Any]]:
    """The answer of `bot.ops.webhook.webhook_route` over a fleet: `runs[name]()` is that
    target's scan."""
    sweeping = threading.Lock()

    def one(name: str) -> dict[str, Any]:
        target = next((t for t in targets if t.name == name), None)
        if target is None:
            raise TargetError("target: unknown target")
        summary = runs[name]()
        return {"targets": [target_head(target.name, target.redis, target.labels, head=summary)]}

    def every() -> dict[str, Any]:
        if not sweeping.acquire(blocking=False):
            raise ScanBusyError("a webhook scan of every target is running")
        try:
            done = across(targets, lambda t: runs[t.name](), concurrency)
        finally:
            sweeping.release()
        if not any(o.ok for o in done):
            raise RedisUnavailableError("no target could be scanned")
        return {"targets": [_part(o) for o in done]}

    def answer(request: Request) -> dict[str, Any]:
        name = requested_target(request)
        return every() if name is None else one(name)

    return answer


def _part(o: TargetResult[dict[str, Any]]) -> dict[str, Any]:
    t = o.target
    if o.value is None:
        return target_head(t.name, t.redis, t.labels, error=str(o.error))
    return target_head(t.name, t.redis, t.labels, head=o.value)
