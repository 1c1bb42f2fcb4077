"""Is lockguard doing its job? `Health` answers `GET /healthz`; `SilenceAlarm` says so, once.

A stuck guard and a calm one both look quiet, so silence is measured: every completed scan is
recorded in Redis (`{lockguard}:scan:last`, `{lockguard}:heartbeat`), and a check compares the
server time with twice the scan interval (what `/healthz` answers: docs/always-on.md). Redis's
failures are named in fixed words (`redis_problem`), never the exception's text, a host or a URL,
since `/healthz` is often open to a whole network; the full error is logged once per change.

`SilenceAlarm` alerts once and recovers once across restarts and replicas: the state is the
`{lockguard}:silence` hash, raised with HSETNX and cleared by a read-and-delete script, so exactly
one caller wins each transition; a callback that raises undoes its transition. While Redis is
unreachable nothing changes, and `starting` neither alerts nor recovers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.exceptions import RedisClusterException

from bot.core import logs
from bot.core.clock import iso_utc, text_utc
from bot.core.display import duration
from bot.core.errors import LockguardError
from bot.engine import Engine
from bot.ops.http_server import Request, Response, Route, json_response
from bot.ops.watches import Watch, WatchState, read_watches
from bot.store import scans
from bot.store.connection import describe, redis_errors
from bot.store.keyspace import HEARTBEAT, LAST_SCAN, SILENCE
from bot.store.redis_errors import RedisFailure, is_tls_failure

HEALTH_PATH = "/healthz"
LIVE_PATH = "/livez"
SCANS_KIND = "silence:scans"
WATCH_KIND = "silence:watch:"
#: Scan states in a report.
OK, OVERDUE, STARTING, OFF = "ok", "overdue", "starting", "off"
_SCANS_FIELD = b"scans"
_WATCH_FIELD = b"watch:"
_log = logs.logger("health")

# Clear a field and return what it held (nil when it was not set): one winner per recovery.
_TAKE_LUA = """
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v then redis.call('HDEL', KEYS[1], ARGV[1]) end
return v
"""
# Undo an alert whose callback failed: only if the field still holds what this caller set.
_UNSET_LUA = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""


@dataclass(frozen=True, slots=True)
class HealthReport:
    """One check. Times are Redis server ms; `checked_ms` is 0 when Redis did not answer."""

    endpoint: str
    checked_ms: int = 0
    redis_error: str = ""  # `redis_problem`'s words: nothing from the exception
    last_scan_ms: int | None = None  # the last completed scan, on this Redis
    started_ms: int = 0  # this replica's first check
    limit_ms: int | None = None  # 2 x the scan interval; None: scans are off
    watches: tuple[WatchState, ...] = field(default_factory=tuple)
    #: What this Redis refused the leader lease's heartbeat, and what to grant; "" when nothing.
    lease_refused: str = ""

    @property
    def scans(self) -> str:
        """OK, OVERDUE, STARTING (overdue, but this replica started within the limit) or OFF."""
        if self.limit_ms is None:
            return OFF
        if self.redis_error:
            return ""  # unknown
        if self.last_scan_ms is not None and self.checked_ms - self.last_scan_ms <= self.limit_ms:
            return OK
        return STARTING if self.checked_ms - self.started_ms <= self.limit_ms else OVERDUE

    @property
    def silent_seconds(self) -> float | None:
        """Since the last completed scan, else since this replica started."""
        if self.redis_error:
            return None
        since = self.last_scan_ms if self.last_scan_ms is not None else self.started_ms
        return max(self.checked_ms - since, 0) / 1000

    @property
    def healthy(self) -> bool:
        return not self.redis_error and self.scans != OVERDUE

    @property
    def reasons(self) -> list[str]:
        """Why `/healthz` is 503 (empty: it is 200)."""
        if self.redis_error:
            return [self.redis_error]
        out = [f"scans overdue: {self.scans_words()}"] if self.scans == OVERDUE else []
        if self.lease_refused:
            out.append(f"leader lease: {self.lease_refused}")
        return out

    def scans_words(self) -> str:
        assert self.limit_ms is not None
        silent = duration(self.silent_seconds or 0.0)
        limit = f"expected within {duration(self.limit_ms / 1000)} (twice the scan interval)"
        refused = self.lease_refused and f"; the leader lease was refused: {self.lease_refused}"
        if self.last_scan_ms is None:
            return (
                f"no completed scan recorded in the {silent} since lockguard started; "
                f"{limit}{refused}"
            )
        return (
            f"no scan has completed for {silent} (the last at "
            f"{text_utc(self.last_scan_ms)}); {limit}{refused}"
        )

    def to_json(self) -> dict[str, Any]:
        """The `/healthz` body."""
        silent = self.silent_seconds
        return {
            "status": "ok" if self.healthy else "unhealthy",
            "reasons": self.reasons,
            "warnings": [
                f"silence watch overdue: {w.describe()}" for w in self.watches if w.overdue
            ],
            "redis": self.redis_error.removeprefix("redis: ") if self.redis_error else "ok",
            "checked": iso_utc(self.checked_ms) if self.checked_ms else None,
            "scans": {
                "state": self.scans or "unknown",
                "last_completed": (
                    iso_utc(self.last_scan_ms) if self.last_scan_ms is not None else None
                ),
                "silent_seconds": None if silent is None else round(silent, 3),
                "limit_seconds": None if self.limit_ms is None else self.limit_ms / 1000,
            },
            "watches": [w.to_json() for w in self.watches],
        }


class Health:
    """`interval_seconds`: the longest expected gap between scheduled scans (None: scans off);
    overdue after twice that."""

    def __init__(
        self, engine: Engine, interval_seconds: float | None, watches: Sequence[Watch] = ()
    ) -> None:
        if interval_seconds is not None and not interval_seconds > 0:
            raise ValueError(f"interval_seconds must be positive, got {interval_seconds}")
        self.engine = engine
        self.limit_ms = None if interval_seconds is None else int(2 * interval_seconds * 1000)
        self.watches = tuple(watches)
        self._started_ms: int | None = None
        self._problem = ""  # the last one logged
        #: The last check's Redis failure in one line (naming the endpoint, never a secret).
        self.last_error: LockguardError | None = None
        #: What this Redis refused the lease heartbeat (`bot.serve.fleet_operations` sets it).
        self.lease_refused: Callable[[], str] = str

    def answer(self) -> tuple[int, dict[str, Any]]:
        """`/healthz` for one Redis: a check made now, 200 or 503."""
        report = self.check()
        return (200 if report.healthy else 503), report.to_json()

    def check(self) -> HealthReport:
        engine = self.engine
        try:
            with engine.client.pipeline(transaction=False) as pipe:
                pipe.ping()
                pipe.time()
                pipe.get(LAST_SCAN)
                pipe.get(HEARTBEAT)
                _, now_reply, last_raw, beat_raw = pipe.execute()
            states = tuple(read_watches(engine.client, self.watches))
        except (redis.RedisError, RedisClusterException) as exc:
            problem = redis_problem(exc)
            self.last_error = describe(exc, engine.endpoint, engine.secrets)
            if problem != self._problem:
                self._problem = problem
                logs.event(
                    _log,
                    "health_redis_failed",
                    logging.WARNING,
                    problem=problem,
                    error=str(self.last_error),
                )
            return HealthReport(engine.endpoint, redis_error=problem, limit_ms=self.limit_ms)
        self._problem = ""
        self.last_error = None
        now = scans.time_ms(now_reply)
        if self._started_ms is None:
            self._started_ms = now
        return HealthReport(
            engine.endpoint,
            checked_ms=now,
            last_scan_ms=_last_scan_ms(last_raw, beat_raw),
            started_ms=self._started_ms,
            lease_refused=self.lease_refused(),
            limit_ms=self.limit_ms,
            watches=states,
        )


def check_every(longest_s: float, interval_seconds: float | None) -> float:
    """Seconds between two health checks: every half scan interval (at least 1 s), so scans
    overdue are alarmed within about two intervals, but never less often than `longest_s`."""
    if interval_seconds is None:
        return longest_s
    return min(longest_s, max(1.0, interval_seconds / 2))


#: (exception class, words), first match wins: subclasses before their bases.
_PROBLEMS: tuple[tuple[type[BaseException], str], ...] = (
    (RedisClusterException, "redis: cluster unavailable"),
    (redis.exceptions.AuthenticationError, "redis: refused (auth)"),
    (redis.exceptions.NoPermissionError, "redis: refused (acl)"),
    (redis.exceptions.BusyLoadingError, "redis: loading"),
    (redis.exceptions.TimeoutError, "redis: timed out"),
    (redis.exceptions.ConnectionError, "redis: unreachable"),
    (redis.exceptions.ResponseError, "redis: refused"),
)


def redis_problem(exc: RedisFailure) -> str:
    """Fixed words chosen by the exception's class, never its text (hosts, ports, replies)."""
    if isinstance(exc, redis.RedisError) and is_tls_failure(exc):
        return "redis: tls failed"
    if isinstance(exc, redis.ResponseError) and str(exc).startswith(("NOAUTH", "WRONGPASS")):
        return "redis: refused (auth)"
    return next((words for cls, words in _PROBLEMS if isinstance(exc, cls)), "redis: unreachable")


def _sentence(words: str) -> str:
    return words[:1].upper() + words[1:] + "."


def _last_scan_ms(last_raw: object, beat_raw: object) -> int | None:
    """The server time of the last completed scan: its summary's, else the heartbeat's."""
    found: list[int] = []
    if isinstance(last_raw, bytes):
        try:
            value = json.loads(last_raw).get("server_time_ms")
        except (ValueError, AttributeError):
            value = None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            found.append(value)
    if isinstance(beat_raw, bytes) and beat_raw.isdigit():
        found.append(int(beat_raw))
    return max(found) if found else None


Alert = Callable[[str, str, str], object]
Recovered = Callable[[str, str], object]


class SilenceAlarm:
    """`observe(health.check())` periodically on every replica; `alert(kind, title, detail)` and
    `recovered(kind, title)` fit `Notifier.raise_alert` and `Notifier.resolve`."""

    def __init__(self, engine: Engine, alert: Alert, recovered: Recovered) -> None:
        self.engine = engine
        self._alert = alert
        self._recovered = recovered
        self._take = engine.client.register_script(_TAKE_LUA)
        self._unset = engine.client.register_script(_UNSET_LUA)

    def observe(self, report: HealthReport) -> list[str]:
        """The transitions made here, e.g. `["alert silence:scans"]`; a Redis failure is logged,
        not raised (the next check tries again)."""
        if report.redis_error:
            return []
        done: list[str] = []
        try:
            with redis_errors(self.engine.endpoint, self.engine.secrets):
                if report.scans == OVERDUE:
                    self._raise(
                        done,
                        SCANS_KIND,
                        _SCANS_FIELD,
                        report.checked_ms,
                        "lockguard scans are overdue",
                        _sentence(report.scans_words()) + " Scans may be failing "
                        "(see the other alerts), the scheduler may have stopped, or the "
                        "replica running it may be wedged; `/lockguard status` and "
                        "GET /healthz say more.",
                    )
                elif report.scans == OK:
                    self._recover(done, SCANS_KIND, _SCANS_FIELD, "lockguard scans complete again")
                for w in report.watches:
                    kind, fld = WATCH_KIND + w.watch.name, _WATCH_FIELD + w.watch.key
                    if w.overdue:
                        self._raise(
                            done,
                            kind,
                            fld,
                            report.checked_ms,
                            f"silence watch {w.watch.name}: {w.problem}",
                            f"{w.describe()}: the job that updates it may have stopped.",
                        )
                    else:
                        self._recover(
                            done, kind, fld, f"silence watch {w.watch.name} is fresh again"
                        )
        except LockguardError as exc:
            logs.event(_log, "silence_alarm_failed", logging.WARNING, error=str(exc))
        return done

    def _raise(
        self, done: list[str], kind: str, fld: bytes, now_ms: int, title: str, detail: str
    ) -> None:
        mark = str(now_ms).encode()
        if not self.engine.client.hsetnx(SILENCE, fld, mark):
            return  # already alerting: someone said so
        try:
            self._alert(kind, title, detail)
        except Exception:
            _log.exception("silence alarm: the alert callback failed for %s", kind)
            self._unset(keys=[SILENCE], args=[fld, mark])
            return
        logs.event(_log, "silence_alert", logging.WARNING, kind=kind, title=title)
        done.append(f"alert {kind}")

    def _recover(self, done: list[str], kind: str, fld: bytes, title: str) -> None:
        held = self._take(keys=[SILENCE], args=[fld])
        if not isinstance(held, bytes):
            return  # was not alerting, or another replica announced it
        try:
            self._recovered(kind, title)
        except Exception:
            _log.exception("silence alarm: the recovery callback failed for %s", kind)
            self.engine.client.hsetnx(SILENCE, fld, held)
            return
        logs.event(_log, "silence_recovered", kind=kind)
        done.append(f"recovered {kind}")


def health_route(answer: Callable[[], tuple[int, dict[str, Any]]]) -> Route:
    """`answer()`: one Redis's `Health.answer`, or a fleet's `fleet_health`."""

    def handle(request: Request) -> Response:
        status, body = answer()
        return json_response(status, body, {"Cache-Control": "no-store"})

    return Route("GET", HEALTH_PATH, handle)


def live_route() -> Route:
    """200 `{"status": "alive"}` while the server answers. It reads nothing, so an unreachable
    Redis or overdue scans (which a restart would not fix) never get lockguard restarted."""

    def handle(_request: Request) -> Response:
        return json_response(200, {"status": "alive"}, {"Cache-Control": "no-store"})

    return Route("GET", LIVE_PATH, handle)
