"""`POST /hooks/scan` over a fleet, by real HTTP into `serve` (three live redis-servers and one
dead target): without `target` every target is scanned and named, the dead one saying why; with
`target` only that one; a hostile or unknown `target` is 400 and nothing is scanned anywhere."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis

from bot import serve
from bot.config import load_settings
from bot.core.errors import ScanBusyError
from bot.fleet import Target
from bot.ops.http_server import Request
from bot.serve.fleet_webhook import fleet_webhook
from tests.fleet.test_serve_fleet import DEAD, LIVE, metrics
from tests.fleet.test_serve_fleet import clients as clients  # the fixtures
from tests.fleet.test_serve_fleet import served as served
from tests.fleet.test_serve_fleet_slack import plant
from tests.ops.test_ops_serve import KEY
from tests.slack_requests import SlackReply, post

HOURLY = {"LOCKGUARD_SCAN_SCHEDULE": "every 1h", "LOCKGUARD_WEBHOOK_KEY": KEY}
AUTH = {"Authorization": f"Bearer {KEY}"}


def hook(s: serve.Served, query: str = "", body: bytes = b"") -> SlackReply:
    return post(s.url + "/hooks/scan" + query, body, AUTH)


def webhook_scans(s: serve.Served) -> dict[str, int]:
    """Webhook scans each live target counted, from `/metrics`."""
    out = dict.fromkeys(LIVE, 0)
    for (name, labels), value in metrics(s.url).items():
        got = dict(labels)
        counted = got.get("trigger") == "webhook" and got.get("outcome") != "failed"
        if name == "lockguard_scans_total" and counted and got["target"] in out:
            out[got["target"]] += int(value)
    return out


def test_the_webhook_scans_every_target_and_names_each(
    served: Callable[..., serve.Served], clients: dict[str, redis.Redis]
) -> None:
    plant(clients["queue"], b"lock:stuck")
    s = served(**HOURLY)
    reply = hook(s, body=b'{"alerts": [{"labels": {"alertname": "QueueStalled"}}]}')
    assert reply.status == 200
    parts = {p["name"]: p for p in json.loads(reply.body)["targets"]}
    assert list(parts) == [*LIVE, DEAD]
    assert {n: parts[n]["status"] for n in parts} == {
        "orders": "ok",
        "queue": "ok",
        "sessions": "ok",
        DEAD: "error",
    }
    assert parts[DEAD]["error"]
    assert parts[DEAD]["redis"].startswith("redis://127.0.0.1:")
    assert parts["queue"]["finding_count"] == 1
    assert [f["key"] for f in parts["queue"]["findings"]] == ["lock:stuck"]
    assert parts["orders"]["finding_count"] == 0
    assert webhook_scans(s) == {"orders": 1, "queue": 1, "sessions": 1}


def test_the_webhook_scans_only_the_target_it_names(
    served: Callable[..., serve.Served], clients: dict[str, redis.Redis]
) -> None:
    s = served(**HOURLY)
    by_query = hook(s, "?target=sessions")
    assert by_query.status == 200
    [part] = json.loads(by_query.body)["targets"]
    assert (part["name"], part["status"]) == ("sessions", "ok")
    by_body = hook(s, body=b'{"target": "queue"}')
    assert [p["name"] for p in json.loads(by_body.body)["targets"]] == ["queue"]
    assert webhook_scans(s) == {"orders": 0, "queue": 1, "sessions": 1}
    dead = hook(s, f"?target={DEAD}")
    assert dead.status == 503


def test_a_hostile_or_unknown_target_is_400_and_nothing_is_scanned(
    served: Callable[..., serve.Served], clients: dict[str, redis.Redis]
) -> None:
    s = served(**HOURLY)
    for query, body in (
        ("?target=payroll", b""),
        ("?target=%3C%21channel%3E%2A", b""),
        ("?target=orders&target=queue", b""),
        ("", b'{"target": ["orders"]}'),
        ("", b'{"target": "' + b"a" * 41 + b'"}'),
    ):
        reply = hook(s, query, body)
        assert reply.status == 400, (query, body)
        error = json.loads(reply.body)["error"]
        assert error.startswith("target: ")
        assert not any(sent in error for sent in ("payroll", "channel", "aaaa"))
    assert webhook_scans(s) == {"orders": 0, "queue": 0, "sessions": 0}
    assert post(s.url + "/hooks/scan?target=orders", b"", {}).status == 401


def test_one_sweep_of_every_target_runs_at_a_time() -> None:
    targets = [Target(name=n, settings=load_settings(env={})) for n in ("a", "b")]
    inside, go = threading.Event(), threading.Event()

    def slow() -> dict[str, Any]:
        inside.set()
        go.wait(10)
        return {"scanned": 1}

    run = fleet_webhook(targets, {"a": slow, "b": lambda: {"scanned": 2}}, 2)
    every, only_b = (
        Request("POST", "/hooks/scan"),
        Request("POST", "/hooks/scan", {"target": ["b"]}),
    )
    first = threading.Thread(target=run, args=(every,))
    first.start()
    assert inside.wait(10)
    with pytest.raises(ScanBusyError):
        run(every)  # a second sweep while the first runs: 503
    assert run(only_b)["targets"][0]["scanned"] == 2  # one named target still runs
    go.set()
    first.join(10)
    assert [p["scanned"] for p in run(every)["targets"]] == [1, 2]
