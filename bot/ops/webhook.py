"""`POST /hooks/scan`: a scan on demand for alarms, queue-stall detectors and runbooks (its
answers: docs/always-on.md, "The webhook").

The right key is never refused: it is checked first, on every request, so wrong keys from a
shared address (a proxy) lock nobody out; the failure limit throttles what wrong keys cost, and
the key's length (`MIN_KEY_LENGTH`) is what stops guessing. The key is compared in constant time
on bytes and never logged nor sent back, nor is a wrong one; a request with several key headers
passes only when every one holds the key. The limiter remembers at most `MAX_ADDRESSES`
addresses, so a flood from many cannot grow it.
"""

from __future__ import annotations

import hmac
import json
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bot.core import logs
from bot.core.errors import LockguardError, ScanBusyError
from bot.core.model import TARGET_NAME
from bot.ops.http_server import Request, Response, Route, error_response, json_response

if TYPE_CHECKING:
    from bot.cases.case import Case
    from bot.engine import Engine
    from bot.scan.result import ScanResult

WEBHOOK_PATH = "/hooks/scan"
#: Findings in a webhook answer, worst first; `findings_truncated` counts the rest.
FINDINGS_LIMIT = 100
MAX_FAILURES = 5
FAILURE_WINDOW_S = 60.0
MAX_ADDRESSES = 10_000
MIN_KEY_LENGTH = 16
#: The largest body read for a `target` (a bigger one, an alarm's own payload, is not read).
TARGET_BODY_LIMIT = 4096
_NO_STORE = {"Cache-Control": "no-store"}
_log = logs.logger("webhook")


class FailureLimiter:
    """At most `max_failures` failures per address within a sliding `window` of seconds; beyond
    `max_addresses` addresses, the least recently failed are forgotten."""

    def __init__(
        self,
        max_failures: int = MAX_FAILURES,
        window: float = FAILURE_WINDOW_S,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_addresses: int = MAX_ADDRESSES,
    ) -> None:
        self.max_failures = max_failures
        self.window = window
        self._clock = clock
        self._max_addresses = max_addresses
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, address: str) -> int | None:
        """Whole seconds until `address` may try again, or None when it may now."""
        now = self._clock()
        with self._lock:
            times = self._failures.get(address)
            if times is None:
                return None
            while times and times[0] <= now - self.window:
                times.popleft()
            if not times:
                del self._failures[address]
                return None
            if len(times) < self.max_failures:
                return None
            return max(1, math.ceil(times[0] + self.window - now))

    def __len__(self) -> int:
        with self._lock:
            return len(self._failures)

    def failed(self, address: str) -> None:
        now = self._clock()
        with self._lock:
            times = self._failures.pop(address, None) or deque(maxlen=self.max_failures)
            times.append(now)
            self._failures[address] = times  # now the most recent
            while len(self._failures) > self._max_addresses:
                self._failures.popitem(last=False)


def check_webhook_key(value: str | None) -> str | None:
    """For the settings: None when unset or blank (the webhook is off); a ValueError never quotes
    the value."""
    if value is None or not value.strip():
        return None
    key = value.strip()
    if not all(0x21 <= ord(c) <= 0x7E for c in key):
        raise ValueError("expected printable ASCII without spaces (it travels in an HTTP header)")
    if len(key) < MIN_KEY_LENGTH:
        raise ValueError(
            f"expected at least {MIN_KEY_LENGTH} characters; generate one with "
            "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
        )
    return key


def presented_keys(request: Request) -> list[bytes]:
    """From every `Authorization: Bearer <key>` and `X-Lockguard-Key` header."""
    out = []
    for value in request.headers.getlist("Authorization"):
        scheme, _, token = value.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            out.append(_raw(token.strip()))
    out += [_raw(v.strip()) for v in request.headers.getlist("X-Lockguard-Key") if v.strip()]
    return out


def _raw(text: str) -> bytes:
    # Starlette decodes header bytes as latin-1: this gives back the bytes that were sent.
    return text.encode("latin-1", "replace")


def _authorized(request: Request, key: bytes) -> bool:
    presented = presented_keys(request)
    ok = bool(presented)
    for candidate in presented:  # every one is compared: no early exit on the first mismatch
        ok = hmac.compare_digest(candidate, key) and ok
    return ok


class TargetError(LockguardError):
    """A `target` that is no target's name: 400, nothing scanned; quotes nothing sent."""


def requested_target(request: Request) -> str | None:
    """`?target=NAME`, or a JSON body `{"target": "NAME"}` (any other body is ignored)."""
    values = list(request.query.get("target", []))
    if not values and 0 < len(request.body) <= TARGET_BODY_LIMIT:
        try:
            doc = json.loads(request.body)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and "target" in doc:
            values = [doc["target"]]
    if not values:
        return None
    if len(values) > 1:
        raise TargetError("target: name one target")
    name = values[0]
    if not isinstance(name, str) or not TARGET_NAME.fullmatch(name):
        raise TargetError("target: expected a target's name, [a-z0-9-]{1,40}")
    return name


def webhook_route(
    answer: Callable[[Request], dict[str, Any]],
    key: str | None,
    *,
    limiter: FailureLimiter | None = None,
) -> Route:
    """`key` None: 404. `answer(request)` runs the scan asked for and returns its JSON object,
    or raises TargetError (400) or a LockguardError (503, or 500 for a bug)."""
    secret = key.encode("utf-8") if key else None
    limits = limiter if limiter is not None else FailureLimiter()

    def handle(request: Request) -> Response:
        if secret is None:
            return error_response(404, "not_found")
        address = request.remote_addr or "?"
        if not _authorized(request, secret):  # the right key is never refused, limited or not
            wait = limits.retry_after(address)
            if wait is not None:
                logs.event(_log, "webhook_refused", remote=address, why="rate_limited")
                return error_response(
                    429, "too_many_failures", {"Retry-After": str(wait), **_NO_STORE}
                )
            limits.failed(address)
            why = "wrong_key" if presented_keys(request) else "missing_key"
            logs.event(_log, "webhook_refused", remote=address, why=why)
            return error_response(
                401, "unauthorized", {"WWW-Authenticate": 'Bearer realm="lockguard"', **_NO_STORE}
            )
        try:
            summary = answer(request)
        except TargetError as exc:
            return error_response(400, str(exc), _NO_STORE)
        except ScanBusyError as exc:
            return error_response(503, str(exc), {"Retry-After": "60", **_NO_STORE})
        except LockguardError as exc:  # its message names the endpoint, never a secret
            return error_response(503 if exc.exit_code == 3 else 500, str(exc), _NO_STORE)
        logs.event(
            _log,
            "webhook_scan",
            remote=address,
            target=_named(summary),
            scanned=_total(summary, "scanned"),
            findings=_total(summary, "finding_count"),
        )
        return json_response(200, summary, _NO_STORE)

    return Route("POST", WEBHOOK_PATH, handle)


def scan_runner(
    engine: Engine,
    *,
    limit: int = FINDINGS_LIMIT,
    on_result: Callable[[ScanResult, Case | None], None] | None = None,
    on_error: Callable[[BaseException], None] | None = None,
) -> Callable[[], dict[str, Any]]:
    """One `engine.scan("webhook")` as `scan_json` with at most `limit` findings. `on_result`
    follows a completed scan (its failure is logged, the answer stands); `on_error` runs before
    a failure is answered."""
    from bot.report import scan_json

    def run() -> dict[str, Any]:
        try:
            result, case = engine.scan("webhook", keep=max(limit, 0))
        except Exception as exc:
            if on_error is not None:
                _quietly(on_error, exc)
            raise
        if on_result is not None:
            _quietly(on_result, result, case)
        return scan_json(result, case, engine.endpoint, limit=limit)

    return run


def _named(summary: dict[str, Any]) -> str | None:
    """The one target a fleet's answer names, else None."""
    parts = summary.get("targets")
    return parts[0].get("name") if isinstance(parts, list) and len(parts) == 1 else None


def _total(summary: dict[str, Any], field: str) -> Any:
    """`summary[field]`, or its sum over a fleet's parts (`{"targets": [...]}`)."""
    if "targets" not in summary:
        return summary.get(field)
    return sum(int(p.get(field) or 0) for p in summary["targets"] if isinstance(p, dict))


def _quietly(callback: Callable[..., None], *args: Any) -> None:
    try:
        callback(*args)
    except Exception:
        _log.exception("webhook: %s failed", getattr(callback, "__name__", "a callback"))
