"""`POST /hooks/scan` over a fleet: with `target` (`bot.ops.webhook.requested_target`), that
target's scan only, `{"targets": [part]}`; without, every target at most
`LOCKGUARD_TARGET_CONCURRENCY` at once, and one such sweep at a time (another is 503, so threads
stay bounded whoever calls). A name that is no target's is 400 and is not echoed (its answers:
docs/always-on.md, "The webhook").
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
    """`runs[name]()`: that target's scan."""
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
