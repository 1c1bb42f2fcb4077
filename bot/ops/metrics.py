"""`GET /metrics`: lockguard's Prometheus metrics (named, with their labels, in docs/metrics.md),
fed from Engine results. Every sample carries `target` (`default` without a targets file).

"The last completed scan" is the last anyone completed on this Redis: each scrape reads each
target's `{lockguard}:scan:last` (`refresh_last_scan`), so every replica reports the same;
counters and the histogram are per process. With `LOCKGUARD_METRICS_TOKEN`, a scrape without
`Authorization: Bearer <token>` is 401 and reads nothing. `FleetMetrics` is the one collector in
its own `CollectorRegistry`, never the global one, so several in one process do not collide.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import redis
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from bot.cases.case import Case, State
from bot.core import logs
from bot.core.model import Reason
from bot.engine import TRIGGERS
from bot.ops.http_server import Request, Response, Route, error_response
from bot.release import Outcome
from bot.scan.result import ScanResult
from bot.store import scans

if TYPE_CHECKING:
    from bot.engine import Engine

METRICS_PATH = "/metrics"
#: The classic Prometheus text format that `generate_latest` writes.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OUTCOMES = ("ok", "findings", "failed")
#: Histogram buckets for scan durations, in seconds (+Inf is added).
DURATION_BUCKETS = (0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0)
_log = logs.logger("metrics")


class Metrics:
    """One target's metrics; thread-safe (the scheduler, HTTP and Slack feed it)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._up = False
        self._lock = threading.Lock()
        self._scans: dict[tuple[str, str], int] = {(t, o): 0 for t in TRIGGERS for o in OUTCOMES}
        self._last_success_s = 0.0
        self._durations = [0] * (len(DURATION_BUCKETS) + 1)
        self._duration_sum = 0.0
        self._locks: dict[str, int] = {r.value: 0 for r in Reason}
        self._oldest_s = 0.0
        self._cases: dict[str, int] = {s.value: 0 for s in State}
        self._releases: dict[str, int] = {o.value: 0 for o in Outcome}
        self._leader = False
        self._pending_age_s = 0.0
        self._overdue = False

    # -- fed by the entry points -------------------------------------------------------------

    def scan_done(self, trigger: str, result: ScanResult) -> None:
        outcome = "findings" if result.findings else "ok"
        with self._lock:
            self._scans[(trigger, outcome)] = self._scans.get((trigger, outcome), 0) + 1
            seconds = max(result.duration_seconds, 0.0)
            self._duration_sum += seconds
            bucket = next(
                (i for i, b in enumerate(DURATION_BUCKETS) if seconds <= b), len(DURATION_BUCKETS)
            )
            self._durations[bucket] += 1
        self.last_scan(result.summary())

    def scan_failed(self, trigger: str) -> None:
        with self._lock:
            self._scans[(trigger, "failed")] = self._scans.get((trigger, "failed"), 0) + 1

    def last_scan(self, summary: Mapping[str, Any] | None) -> None:
        """From `ScanResult.summary()` (the JSON in `{lockguard}:scan:last`); one older than
        what is shown is ignored."""
        if not summary:
            return
        at_s = _number(summary.get("server_time_ms")) / 1000
        by_reason = summary.get("by_reason")
        with self._lock:
            if at_s < self._last_success_s:
                return
            self._last_success_s = at_s
            self._oldest_s = _number(summary.get("oldest_held_seconds"))
            if isinstance(by_reason, Mapping):
                self._locks = {r.value: int(_number(by_reason.get(r.value))) for r in Reason}

    def cases(self, cases: Iterable[Case], now_ms: int) -> None:
        """Per state as of `now_ms` (server time)."""
        counts = {s.value: 0 for s in State}
        oldest_pending_ms = now_ms
        for case in cases:
            state = case.effective_state(now_ms)
            counts[state.value] += 1
            if state is State.PENDING:
                oldest_pending_ms = min(oldest_pending_ms, case.created_ms)
        with self._lock:
            self._cases = counts
            self._pending_age_s = max(now_ms - oldest_pending_ms, 0) / 1000

    def releases(self, counts: Mapping[str, int]) -> None:
        """`ApprovalReport.counts`: outcome -> locks."""
        with self._lock:
            for outcome, n in counts.items():
                self._releases[outcome] = self._releases.get(outcome, 0) + max(int(n), 0)

    def scans_overdue(self, overdue: bool) -> None:
        self._overdue = bool(overdue)  # one assignment: atomic

    def leader(self, is_leader: bool) -> None:
        with self._lock:
            self._leader = bool(is_leader)

    def target_up(self, up: bool) -> None:
        self._up = bool(up)  # one assignment: atomic

    # -- read by Prometheus (through FleetMetrics) ---------------------------------------------

    def collect(self) -> Iterator[Metric]:
        for family in self._families():
            yield _with_label(family, "target", self.target)
        yield _target_up(self.target, self._up)

    def _families(self) -> Iterator[Metric]:
        with self._lock:
            scans, releases = dict(self._scans), dict(self._releases)
            locks, cases = dict(self._locks), dict(self._cases)
            durations, duration_sum = list(self._durations), self._duration_sum
            last, oldest, leader = self._last_success_s, self._oldest_s, self._leader
            pending_age, overdue = self._pending_age_s, self._overdue
        family = CounterMetricFamily(
            "lockguard_scans", "Scans run by this process.", labels=["trigger", "outcome"]
        )
        for (trigger, outcome), n in sorted(scans.items()):
            family.add_metric([trigger, outcome], n)
        yield family
        yield GaugeMetricFamily(
            "lockguard_last_scan_success_timestamp_seconds",
            "Server time of the last completed scan (0: none known).",
            value=last,
        )
        cumulative, buckets = 0, []
        for bound, n in zip([*map(str, DURATION_BUCKETS), "+Inf"], durations, strict=True):
            cumulative += n
            buckets.append((bound, float(cumulative)))
        yield HistogramMetricFamily(
            "lockguard_scan_duration_seconds",
            "Duration of the scans this process completed.",
            buckets=buckets,
            sum_value=duration_sum,
        )
        yield _labelled(
            GaugeMetricFamily(
                "lockguard_locks",
                "Keys per verdict in the last completed scan.",
                labels=["verdict"],
            ),
            locks,
        )
        yield GaugeMetricFamily(
            "lockguard_oldest_lock_age_seconds",
            "Age of the oldest lock in the last completed scan.",
            value=oldest,
        )
        yield _labelled(
            GaugeMetricFamily(
                "lockguard_cases", "Recent approval cases per state.", labels=["state"]
            ),
            cases,
        )
        yield _labelled(
            CounterMetricFamily(
                "lockguard_releases", "Locks per release outcome.", labels=["outcome"]
            ),
            releases,
        )
        yield GaugeMetricFamily(
            "lockguard_oldest_pending_case_age_seconds",
            "How long the oldest case waiting for a decision has waited (0: none waits).",
            value=pending_age,
        )
        yield GaugeMetricFamily(
            "lockguard_scheduler_leader",
            "1 on the replica that runs the schedules, else 0.",
            value=1.0 if leader else 0.0,
        )
        yield GaugeMetricFamily(
            "lockguard_scans_overdue",
            "1 when the last health check found no completed scan within twice the schedule.",
            value=1.0 if overdue else 0.0,
        )


class FleetMetrics(Collector):
    """Every target's `Metrics`, merged into one family per name (Prometheus wants each once)."""

    def __init__(self, targets: Iterable[Metrics]) -> None:
        self.targets = list(targets)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def render(self) -> tuple[bytes, str]:
        """The text exposition and its Content-Type."""
        return generate_latest(self.registry), CONTENT_TYPE

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, Metric] = {}
        for metrics in self.targets:
            for family in metrics.collect():
                if family.name in merged:
                    merged[family.name].samples.extend(family.samples)
                else:
                    merged[family.name] = family
        yield from merged.values()


def _target_up(target: str, up: bool) -> Metric:
    family = GaugeMetricFamily(
        "lockguard_target_up",
        "1 when the target's Redis answered the last check, else 0.",
        labels=["target"],
    )
    family.add_metric([target], 1.0 if up else 0.0)
    return family


def _with_label(family: Metric, label: str, value: str) -> Metric:
    out = Metric(family.name, family.documentation, family.type, family.unit)
    for s in family.samples:
        out.add_sample(s.name, {**s.labels, label: value}, s.value, s.timestamp, s.exemplar)
    return out


def _labelled(family: GaugeMetricFamily | CounterMetricFamily, values: Mapping[str, int]) -> Metric:
    for label, n in sorted(values.items()):
        family.add_metric([label], n)
    return family


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def metrics_route(
    metrics: FleetMetrics,
    refresh: Callable[[], object],
    *,
    token: str | None = None,
) -> Route:
    """Each scrape first calls `refresh`; with `token`, one without `Authorization: Bearer
    <token>` is 401 and reads nothing."""
    secret = token.encode("utf-8") if token else None

    def handle(request: Request) -> Response:
        if secret is not None and not _bearer_is(request, secret):
            return error_response(
                401,
                "unauthorized",
                {"WWW-Authenticate": 'Bearer realm="lockguard"', "Cache-Control": "no-store"},
            )
        refresh()
        body, content_type = metrics.render()
        return Response(body, 200, {"Content-Type": content_type, "Cache-Control": "no-store"})

    return Route("GET", METRICS_PATH, handle)


def _bearer_is(request: Request, secret: bytes) -> bool:
    """Every `Authorization` header (at least one) is `Bearer <secret>`; no early exit."""
    values = request.headers.getlist("Authorization")
    ok = bool(values)
    for value in values:
        scheme, _, presented = value.strip().partition(" ")
        # Starlette decodes header bytes as latin-1: this gives back the bytes that were sent.
        raw = presented.strip().encode("latin-1", "replace")
        ok = hmac.compare_digest(raw, secret) and scheme.lower() == "bearer" and ok
    return ok


def refresh_last_scan(metrics: Metrics, engine: Engine) -> None:
    """One GET; Redis failing leaves the gauges as they were (the scrape still answers)."""
    try:
        metrics.last_scan(scans.last_scan(engine.client))
    except (redis.RedisError, ValueError) as exc:
        logs.event(_log, "metrics_refresh_failed", error=type(exc).__name__)
