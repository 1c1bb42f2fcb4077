"""`POST /hooks/scan` through a real HttpServer on port 0: the key (constant-time, two headers),
nothing run without it, failures rate-limited per address, the scan's JSON summary truncated, and
Redis failures as 503 without a secret."""

from __future__ import annotations

import http.client
import io
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from bot.cases.case import Case
from bot.cases.reclaim_config import ReclaimConfig
from bot.cli import main
from bot.compose import build_engine
from bot.config import load_settings
from bot.core.model import FINDING_REASONS
from bot.core.rules import Policy
from bot.engine import Engine
from bot.ops.http_server import Headers, HttpServer, Request
from bot.ops.webhook import (
    FINDINGS_LIMIT,
    MAX_ADDRESSES,
    FailureLimiter,
    check_webhook_key,
    presented_keys,
    scan_runner,
    webhook_route,
)
from bot.report import finding_json, scan_json_head
from bot.scan.result import ScanOptions, ScanResult
from bot.store.keyspace import SCAN_LEASE
from tests.conftest import RedisServer

KEY = "wh-Key-0123456789abcdef"
POLICY = Policy(stale_threshold_ms=30_000)
OLD = b"ADDED:2025-12-31T23:00:00.250Z@host"  # no TTL and old: an infinite_ttl finding


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Counting:
    """The webhook's answer as `serve` gives it for one Redis (`FleetOperations.webhook`: the
    request's `target` is not read): a real scan_runner's scan, its calls counted."""

    def __init__(self, run: Callable[[], dict[str, Any]]) -> None:
        self.run, self.calls = run, 0

    def __call__(self, _request: Request) -> dict[str, Any]:
        self.calls += 1
        return self.run()


def engine(client: redis.Redis) -> Engine:
    return Engine(
        client,
        ScanOptions([b"lock:*"], POLICY),
        ReclaimConfig(policy=POLICY),
        endpoint="redis://test:1/0",
    )


def post(
    server: HttpServer,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    method: str = "POST",
) -> tuple[int, dict[str, str], Any]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(method, "/hooks/scan", body=body, headers=headers or {})
        resp = conn.getresponse()
        raw = resp.read()
        return (
            resp.status,
            {k.lower(): v for k, v in resp.getheaders()},
            json.loads(raw) if raw else None,
        )
    finally:
        conn.close()


@pytest.fixture
def captured() -> Iterator[list[logging.LogRecord]]:
    """Every lockguard log record at any level, whatever logs.configure did before."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    root = logging.getLogger("lockguard")
    handler, level = Keep(logging.DEBUG), root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield records
    root.removeHandler(handler)
    root.setLevel(level)


def logged(records: list[logging.LogRecord]) -> str:
    return "\n".join(f"{r.getMessage()} {r.__dict__}" for r in records)


Served = tuple[HttpServer, Counting, Clock]


@pytest.fixture
def served(real_redis: redis.Redis) -> Iterator[Served]:
    clock = Clock()
    run = Counting(scan_runner(engine(real_redis), limit=3))
    server = HttpServer(
        "127.0.0.1", 0, [webhook_route(run, KEY, limiter=FailureLimiter(clock=clock))]
    )
    server.start()
    yield server, run, clock
    server.stop()


def test_without_a_configured_key_it_is_404_and_nothing_runs(real_redis: redis.Redis) -> None:
    run = Counting(scan_runner(engine(real_redis)))
    for key in (None, ""):
        with HttpServer("127.0.0.1", 0, [webhook_route(run, key)]) as server:
            status, _, body = post(server, {"Authorization": f"Bearer {KEY}"})
        assert (status, body) == (404, {"error": "not_found"})
    assert run.calls == 0
    assert real_redis.keys(b"{lockguard}:*") == []


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer wrong-key-0123456789"},
        {"Authorization": f"Bearer {KEY}x"},
        {"Authorization": f"Bearer {KEY[:-1]}"},
        {"Authorization": f"Basic {KEY}"},
        {"Authorization": KEY},
        {"X-Lockguard-Key": ""},
        {"X-Lockguard-Key": KEY.upper()},
        {"X-Lockguard-Key": "wrong", "Authorization": f"Bearer {KEY}"},  # every key must match
    ],
)
def test_a_wrong_or_missing_key_is_401_and_nothing_runs(
    served: Served,
    real_redis: redis.Redis,
    captured: list[logging.LogRecord],
    headers: dict[str, str],
) -> None:
    server, run, _ = served
    status, got, body = post(server, headers, body=b'{"pattern": "*"}')
    assert (status, body) == (401, {"error": "unauthorized"})
    assert got["www-authenticate"].startswith("Bearer")
    assert run.calls == 0
    assert real_redis.keys(b"{lockguard}:*") == []  # not even the keyspace migration ran
    text = logged(captured)
    assert "webhook_refused" in text
    assert KEY not in text
    assert "wrong-key" not in text


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": f"Bearer {KEY}"},
        {"Authorization": f"bearer   {KEY}  "},
        {"X-Lockguard-Key": KEY},
        {"X-Lockguard-Key": KEY, "Authorization": f"Bearer {KEY}"},
    ],
)
def test_the_key_runs_one_scan_and_answers_its_json_summary(
    served: Served,
    real_redis: redis.Redis,
    captured: list[logging.LogRecord],
    headers: dict[str, str],
) -> None:
    server, run, _ = served
    for i in range(5):
        real_redis.set(f"lock:old-{i}".encode(), OLD)
    real_redis.set(b"lock:fine", b"tok", px=60_000)
    status, got, body = post(server, headers)
    assert status == 200, body
    assert got["content-type"].startswith("application/json")
    assert got["cache-control"] == "no-store"
    assert run.calls == 1
    assert body["scanned"] == 6
    assert body["finding_count"] == 5
    assert len(body["findings"]) == 3  # the limit of this route
    assert body["findings_truncated"] == 2
    assert body["redis"] == "redis://test:1/0"
    assert body["case"]["state"] == "pending"  # proposed, as a scheduled scan does
    for finding in body["findings"]:
        assert {"key", "key_hex", "type", "reason", "ttl_ms", "held_seconds", "identity"} <= set(
            finding
        )
        assert finding["reason"] == "infinite_ttl"
    assert real_redis.exists(b"{lockguard}:scan:last")
    text = logged(captured) + json.dumps(body)
    assert KEY not in text


def test_the_answer_has_the_scan_json_shape(
    real_redis: redis.Redis, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_redis.set(b"lock:old", OLD)
    real_redis.set(b"lock:fine", b"tok", px=60_000)
    e = engine(real_redis)
    kept: list[tuple[ScanResult, Case | None]] = []
    answer = scan_runner(e, on_result=lambda result, case: kept.append((result, case)))()
    ((result, case),) = kept
    head = scan_json_head(result, case, e.endpoint)
    assert list(answer) == [*head, "findings", "findings_truncated"]
    assert {k: answer[k] for k in head} == head
    assert answer["findings"] == [
        finding_json(f) for f in result.worst if f.reason in FINDING_REASONS
    ]
    assert [f["key"] for f in answer["findings"]] == ["lock:old"]
    assert answer["findings_truncated"] == 0
    # The same keys as `lockguard scan --json` prints.
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{redis_server.port}/0")
    out = io.StringIO()
    assert main(["scan", "--json"], out=out) == 1
    cli = json.loads(out.getvalue())
    assert list(cli) == [k for k in answer if k != "findings_truncated"]
    assert set(cli["findings"][0]) == set(answer["findings"][0])
    assert FINDINGS_LIMIT == 100


def test_repeated_failures_are_rate_limited_but_the_right_key_always_runs(
    served: Served, real_redis: redis.Redis
) -> None:
    server, run, clock = served
    wrong = {"X-Lockguard-Key": "nope"}
    for _ in range(5):
        assert post(server, wrong)[0] == 401
        clock.now += 1
    status, got, body = post(server, wrong)
    assert (status, body) == (429, {"error": "too_many_failures"})
    assert got["retry-after"] == "55"  # the first failure leaves the 60 s window then
    assert run.calls == 0
    assert real_redis.keys(b"{lockguard}:*") == []
    # Five wrong keys from this address (a proxy's, shared by every caller) lock nobody out:
    # the right key from the same address runs at once, in either header.
    assert post(server, {"X-Lockguard-Key": KEY})[0] == 200
    assert post(server, {"Authorization": f"Bearer {KEY}"})[0] == 200
    assert run.calls == 2
    # ... and wrong keys stay throttled (a right one does not reset the count).
    assert post(server, wrong)[0] == 429
    assert post(server, {"X-Lockguard-Key": "wrong", "Authorization": f"Bearer {KEY}"})[0] == 429
    assert run.calls == 2
    clock.now += 55  # the first failure has left the window: one more try
    assert post(server, wrong)[0] == 401
    assert post(server, wrong)[0] == 429


def post_from(server: HttpServer, source: str, headers: dict[str, str]) -> int:
    """The status of a POST sent from the loopback address `source` (127.0.0.0/8 is all ours)."""
    conn = http.client.HTTPConnection(
        "127.0.0.1", server.port, timeout=10, source_address=(source, 0)
    )
    try:
        conn.request("POST", "/hooks/scan", headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


def test_the_limiter_remembers_a_bounded_number_of_addresses(real_redis: redis.Redis) -> None:
    clock = Clock()
    limiter = FailureLimiter(2, 60, clock=clock, max_addresses=3)
    run = Counting(scan_runner(engine(real_redis)))
    wrong = {"X-Lockguard-Key": "nope"}
    with HttpServer("127.0.0.1", 0, [webhook_route(run, KEY, limiter=limiter)]) as server:
        assert [post_from(server, "127.0.0.2", wrong) for _ in range(3)] == [401, 401, 429]
        for n in range(3, 9):  # failures from six more addresses
            assert post_from(server, f"127.0.0.{n}", wrong) == 401
            assert len(limiter) <= 3
        assert len(limiter) == 3
        # The least recently failed address was forgotten, so it has its tries again.
        assert post_from(server, "127.0.0.2", wrong) == 401
        assert post_from(server, "127.0.0.2", {"X-Lockguard-Key": KEY}) == 200
    assert run.calls == 1
    assert MAX_ADDRESSES == 10_000
    assert FailureLimiter().retry_after("127.0.0.1") is None


def test_the_limit_is_per_remote_address() -> None:
    clock = Clock()
    limiter = FailureLimiter(3, 10, clock=clock)
    handle = webhook_route(lambda _: {"scanned": 0}, KEY, limiter=limiter).handler
    for _ in range(3):
        assert handle(Request("POST", "/hooks/scan", remote_addr="10.0.0.1")).status_code == 401
    assert handle(Request("POST", "/hooks/scan", remote_addr="10.0.0.1")).status_code == 429
    ok = Request(
        "POST",
        "/hooks/scan",
        headers=Headers({"Authorization": f"Bearer {KEY}"}),
        remote_addr="10.0.0.2",
    )
    assert handle(ok).status_code == 200
    clock.now += 10
    assert limiter.retry_after("10.0.0.1") is None


def test_the_limiter_forgets_the_least_recent_addresses() -> None:
    limiter = FailureLimiter(1, 60, clock=Clock(), max_addresses=2)
    for address in ("a", "b", "c"):
        limiter.failed(address)
    assert limiter.retry_after("a") is None
    assert limiter.retry_after("b") == 60
    assert limiter.retry_after("c") == 60


def test_redis_down_is_503_naming_the_endpoint_without_the_password(
    closed_port: int, captured: list[logging.LogRecord]
) -> None:
    settings = load_settings(
        {
            "REDIS_URL": f"redis://:pw-S3cret@127.0.0.1:{closed_port}/0",
            "LOCKGUARD_REDIS_TIMEOUT_SECONDS": "1",
        }
    )
    errors: list[BaseException] = []
    run = Counting(scan_runner(build_engine(settings), on_error=errors.append))
    with HttpServer("127.0.0.1", 0, [webhook_route(run, KEY)]) as server:
        status, _, body = post(server, {"Authorization": f"Bearer {KEY}"})
    assert status == 503
    assert f"127.0.0.1:{closed_port}" in body["error"]
    seen = json.dumps(body) + logged(captured)
    assert "pw-S3cret" not in seen
    assert KEY not in seen
    assert len(errors) == 1  # serve counts it there (tests/ops/test_ops_serve.py)


def test_a_running_scan_is_503_with_retry_after(served: Served, real_redis: redis.Redis) -> None:
    server, _, _ = served
    real_redis.set(b"{lockguard}:keyspace", b"2")
    real_redis.set(SCAN_LEASE, b"someone-else", px=60_000)
    status, got, body = post(server, {"Authorization": f"Bearer {KEY}"})
    assert status == 503
    assert got["retry-after"] == "60"
    assert "a scan is running on this Redis" in body["error"]


def test_callbacks_see_the_result_and_a_failing_one_changes_nothing(
    real_redis: redis.Redis,
) -> None:
    real_redis.set(b"lock:old", OLD)
    seen: list[Any] = []

    def post_findings(result: Any, case: Any) -> None:
        seen.append((result.findings, case is not None))
        raise RuntimeError("slack is down")

    run = Counting(scan_runner(engine(real_redis), on_result=post_findings))
    with HttpServer("127.0.0.1", 0, [webhook_route(run, KEY)]) as server:
        status, _, body = post(server, {"Authorization": f"Bearer {KEY}"})
        assert post(server, {"Authorization": f"Bearer {KEY}"}, method="GET")[0] == 405
    assert status == 200
    assert body["finding_count"] == 1
    assert seen == [(1, True)]


def test_presented_keys() -> None:
    request = Request(
        "POST",
        "/hooks/scan",
        headers=Headers(
            raw=[
                (b"authorization", b"Bearer a"),
                (b"authorization", b"Token b"),
                (b"x-lockguard-key", b" c "),
                (b"x-lockguard-key", b""),
            ]
        ),
    )
    assert presented_keys(request) == [b"a", b"c"]


@pytest.mark.parametrize(
    ("value", "expected"), [(None, None), ("", None), ("   ", None), (f" {KEY} ", KEY)]
)
def test_check_webhook_key(value: str | None, expected: str | None) -> None:
    assert check_webhook_key(value) == expected


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("short", "at least 16"),
        ("has a space inside it!", "printable ASCII"),
        ("caf\u00e9-0123456789abcdef", "printable ASCII"),
    ],
)
def test_check_webhook_key_refuses_without_quoting(value: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as info:
        check_webhook_key(value)
    assert value not in str(info.value)
