"""`lockguard serve` in Socket Mode, end to end over the real protocol.

`python -m bot serve` runs as a child process with SLACK_APP_TOKEN set, on a real redis-server.
Slack is played by two local servers (tests/socket_mode_mock.py): FakeSlack's Web API, whose
`apps.connections.open` hands out a `ws://127.0.0.1:<port>/link/?ticket=...` URL, and the
WebSocket endpoint behind it, which does the RFC 6455 handshake, says `hello`, and sends
envelopes exactly as Slack does. What is checked is what Slack and a person would see: each
envelope acknowledged over the socket with its envelope_id within Slack's 3 seconds, then the
Web API calls that follow (the findings message, the status answer, the updated message), the
lock gone from Redis after Approve, and on SIGTERM the socket closed and exit 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl

import pytest
import redis

from bot.demo.embedded import free_port
from bot.slack.blocks import ids
from tests.block_kit import check_message
from tests.core.test_layouts import uuid1_hex
from tests.slack_app_harness import ALERTS, TOKEN, TWO_HOURS_MS, base_env, blocks_text, buttons
from tests.slack_fixtures import drop_proxy_settings
from tests.slack_mock import Call
from tests.slack_requests import (
    app_home_opened,
    block_action_payload,
    event_callback_body,
    post,
    slash_command_body,
)
from tests.socket_mode_mock import FakeSocketMode, Link, SocketModeSlack

APP_TOKEN = "xapp-1-A0LOCKGUARD-1337-socketmodetesttoken"
ACK_WITHIN = 3.0  # Slack's deadline for the acknowledgement of an envelope
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOCKET_LINE = "lockguard serve: Socket Mode (HTTP for the other endpoints) on 127.0.0.1:"


@pytest.fixture
def links() -> Iterator[FakeSocketMode]:
    with FakeSocketMode() as server:
        yield server


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, links: FakeSocketMode) -> Iterator[SocketModeSlack]:
    """The Web API; every message the app sends is checked against Slack's limits."""
    drop_proxy_settings(monkeypatch)
    web = SocketModeSlack(links, on_message=check_message)
    web.start()
    try:
        yield web
    finally:
        web.stop()
    assert web.hook_errors == []


class Child:
    """`python -m bot serve` with its stderr read on a thread (so it can never block on it)."""

    def __init__(self, env: dict[str, str]) -> None:
        child_env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve"],
            cwd=ROOT,
            env={**child_env, **env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, name="serve-stderr", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self.lines.append("<eof>")
            self._changed.notify_all()

    @property
    def stderr(self) -> str:
        with self._changed:
            return "\n".join(self.lines)

    def wait_for_line(self, starts: str, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.lines:
                    if line.startswith(starts):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or "<eof>" in self.lines:
                    raise AssertionError(
                        f"serve did not say {starts!r}; it said:\n" + "\n".join(self.lines)
                    )
                self._changed.wait(left)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self._reader.join(timeout=5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture
def serve_socket(
    fake: SocketModeSlack, redis_server: Any, real_redis: redis.Redis
) -> Iterator[Callable[..., Child]]:
    """`serve_socket(**env)`: serve in Socket Mode with these settings on top of `base_env`,
    once it has said its start-up line. Killed at the end if a test left it running."""
    started: list[Child] = []

    def start(**env: str) -> Child:
        child = Child(
            {
                **base_env(redis_server.port, fake),
                "SLACK_APP_TOKEN": APP_TOKEN,
                "LOCKGUARD_LOG_LEVEL": "info",
                **env,
            }
        )
        started.append(child)
        child.wait_for_line(SOCKET_LINE)
        return child

    try:
        yield start
    finally:
        for child in started:
            child.stop()
            print(f"-- serve's stderr --\n{child.stderr}")  # shown when the test failed


def plant(r: redis.Redis, key: bytes, age_ms: int = TWO_HOURS_MS) -> bytes:
    """A redis-py lock with no TTL whose uuid1 token says it was taken `age_ms` ago."""
    token = uuid1_hex(int(r.time()[0]) * 1000 - age_ms)
    r.set(key, token)
    return token


def slash(link: Link, text: str, **kw: str) -> str:
    """`/lockguard <text>` as Slack sends it over the socket: the slash command's fields (the
    same as HTTP mode's form body) as the payload; returns the envelope id."""
    kw.setdefault("channel_id", ALERTS)  # LOCKGUARD_SLACK_CHANNEL: scans post only there
    payload = dict(parse_qsl(slash_command_body(text=text, **kw), keep_blank_values=True))
    return link.send_envelope("slash_commands", payload, accepts_response_payload=True)


def acked(link: Link, envelope_id: str) -> dict[str, Any]:
    """The acknowledgement, which must come within Slack's 3 seconds."""
    sent = time.monotonic()
    ack = link.wait_for_ack(envelope_id, timeout=ACK_WITHIN + 1)
    took = time.monotonic() - sent
    assert took < ACK_WITHIN, f"acked after {took:.2f}s"
    assert len(link.acks(envelope_id)) == 1  # once
    return ack


def released_update(fake: SocketModeSlack, timeout: float = 5.0) -> Call:
    """The first chat.update saying "Released" (an earlier one may say "Releasing…")."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for call in fake.calls("chat.update"):
            if str(call.body.get("text", "")).split(": ", 1)[-1].startswith("Released"):
                return call
        time.sleep(0.02)
    raise AssertionError(f"no 'Released' update; got {fake.summary()}")


def response_to(fake: SocketModeSlack, target: str, timeout: float = 5.0) -> Call:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for call in fake.calls("response_url"):
            if call.target == target:
                return call
        time.sleep(0.02)
    raise AssertionError(f"nothing sent to response_url/{target}; got {fake.summary()}")


def test_serve_in_socket_mode_answers_status_scan_and_approve_then_stops_on_sigterm(
    serve_socket: Callable[..., Child],
    links: FakeSocketMode,
    fake: SocketModeSlack,
    redis_server: Any,
    real_redis: redis.Redis,
) -> None:
    port = free_port()
    child = serve_socket(LOCKGUARD_DRY_RUN="false", LOCKGUARD_APPROVERS="U0ALICE", PORT=str(port))

    # -- connected: apps.connections.open with the app token, then the WebSocket it named ----
    link = links.wait_for_link()
    [opened] = fake.calls("apps.connections.open")
    assert opened.token == APP_TOKEN
    assert opened.response["url"].endswith(link.path)  # the URL it was given, ticket and all
    assert links.refused == []
    assert link.headers["sec-websocket-version"] == "13"
    # The client pinged right away and got its pong; it answers a ping of ours too.
    link.wait_until(lambda: link.pings, "the client's first ping")
    link.wait_for_pong(link.ping(b"lg-server-ping-1"))
    # In Socket Mode Slack talks over the socket: no /slack/events on the HTTP server.
    assert post(f"http://127.0.0.1:{port}/slack/events", b"", {}).status == 404

    # -- /lockguard status: acked empty, answered through the response_url -------------------
    status_id = slash(link, "status", response_url=fake.response_url("status"))
    assert acked(link, status_id) == {"envelope_id": status_id}
    answer = response_to(fake, "status")
    assert answer.body["response_type"] == "ephemeral"
    assert "lockguard status" in answer.body["text"]
    assert f"redis://127.0.0.1:{redis_server.port}" in blocks_text(answer)

    # -- /lockguard scan: acked "Scanning…" over the socket, findings posted in the channel --
    token = plant(real_redis, b"lock:stuck")
    scan_id = slash(link, "scan", response_url=fake.response_url("scan"))
    ack = acked(link, scan_id)
    assert ack["envelope_id"] == scan_id
    assert str(ack["payload"]["text"]).startswith("Scanning")  # what the person sees at once
    [findings] = fake.wait_for("chat.postMessage")
    assert findings.body["channel"] == ALERTS  # LOCKGUARD_SLACK_CHANNEL, where it was typed
    assert findings.token == TOKEN
    assert "lock:stuck" in blocks_text(findings)
    case_id = buttons(findings)[ids.APPROVE]
    assert case_id.startswith("LG-")
    assert buttons(findings) == {ids.APPROVE: case_id, ids.REJECT: case_id}
    assert real_redis.get(b"lock:stuck") == token  # nothing released before a human says so

    # -- Approve, clicked on that message: acked, the lock released, the message updated -----
    ts = str(findings.response["ts"])
    shown = fake.message(ALERTS, ts)
    assert shown is not None
    click = block_action_payload(
        action_id=ids.APPROVE,
        value=case_id,
        user_id="U0ALICE",
        channel_id=ALERTS,
        message_ts=ts,
        message=shown,
        block_id=ids.DECISION_BLOCK,
        response_url=fake.response_url("approve"),
    )
    approve_id = link.send_envelope("interactive", click)
    assert acked(link, approve_id) == {"envelope_id": approve_id}
    update = released_update(fake)
    assert not real_redis.exists(b"lock:stuck")
    assert (update.body["channel"], update.body["ts"]) == (ALERTS, ts)
    assert buttons(update) == {}  # decided: no more buttons
    assert "Approved by <@U0ALICE>" in blocks_text(update)

    # -- SIGTERM: serve closes the socket and exits 0 ----------------------------------------
    assert link.ended is None
    stopping = time.monotonic()
    child.proc.send_signal(signal.SIGTERM)
    assert child.proc.wait(timeout=10) == 0
    # Asserted once serve has exited (its work finished first): nothing can come later.
    assert fake.calls("chat.postEphemeral") == []  # nobody was told something went wrong
    took = time.monotonic() - stopping
    # slack_sdk's builtin client closes the TCP connection without a close frame ("eof");
    # either way it is serve's own stop that closed it, after the "stopping" line.
    assert link.wait_until_ended(timeout=1) in ("eof", "close 1000")
    err = child.stderr
    said = [line.split(" ", 2)[-1] for line in child.lines]
    stop_at = next(
        i for i, line in enumerate(child.lines) if line.startswith("lockguard serve: stopping")
    )
    assert any(line.startswith("The connection has been closed") for line in said[stop_at:])
    assert not any(line.startswith("The connection has been closed") for line in said[:stop_at])
    assert "Traceback" not in err
    for secret in (APP_TOKEN, TOKEN):
        assert secret not in err
    assert took < 8, f"serve took {took:.1f}s to stop"

    # -- over the whole run ------------------------------------------------------------------
    assert link.errors == []  # every client frame masked, none fragmented, no stray opcode
    assert len(links.links) == 1  # one connection: no reconnect churn
    assert len(fake.calls("apps.connections.open")) == 1
    web = [c for c in fake.calls() if c.method not in ("apps.connections.open", "response_url")]
    assert web, fake.summary()
    assert {c.token for c in web} == {TOKEN}  # the bot token for the Web API, never the app's
    assert all(c.status == 200 and c.response.get("ok") for c in web), fake.summary()


def test_events_over_the_socket_reach_the_app_and_a_redelivery_is_dropped(
    serve_socket: Callable[..., Child], links: FakeSocketMode, fake: SocketModeSlack
) -> None:
    """Slack's Events API over Socket Mode: every delivery says which attempt it is; the first
    `retry_attempt: 0, retry_reason: ""`, a redelivery `retry_attempt: 1` (and its reason)."""
    child = serve_socket(PORT=str(free_port()))
    link = links.wait_for_link()
    event = json.loads(event_callback_body(app_home_opened()))
    first = link.send_envelope("events_api", event, retry_attempt=0, retry_reason="")
    assert acked(link, first) == {"envelope_id": first}
    [published] = fake.wait_for("views.publish")
    assert published.body["user_id"] == "U0ALICE"
    assert published.body["view"]["type"] == "home"
    again = link.send_envelope("events_api", event, retry_attempt=1, retry_reason="timeout")
    assert acked(link, again) == {"envelope_id": again}
    # a positive signal, not a sleep: a new event sent after the redelivery is published...
    later = json.loads(event_callback_body(app_home_opened("U0BOB"), event_id="Ev0LATER"))
    link.send_envelope("events_api", later, retry_attempt=0, retry_reason="")
    published_later = fake.wait_for("views.publish", 2)
    # ...and the redelivery, handled before it, published nothing
    assert [c.body["user_id"] for c in published_later] == ["U0ALICE", "U0BOB"]
    child.proc.send_signal(signal.SIGTERM)
    assert child.proc.wait(timeout=10) == 0
    assert link.wait_until_ended(timeout=1) in ("eof", "close 1000")
