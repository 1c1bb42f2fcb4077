"""The HTTP server (bot.ops.http_server): its own answers, and a real Bolt app behind
`POST /slack/events`, driven by signed requests over HTTP with the Web API mocked by FakeSlack."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient
from slack_sdk.signature import SignatureVerifier

from bot.ops.bolt_route import bolt_route, to_bolt_request
from bot.ops.http_server import Headers, HttpServer, Request, Response, Route, json_response
from tests.slack_mock import FakeSlack
from tests.slack_requests import (
    SlackSigner,
    block_action,
    post,
    slash_command,
    slash_command_body,
    view_submission,
)

SECRET = "s"


def echo(request: Request) -> Response:
    return json_response(
        200,
        {
            "method": request.method,
            "path": request.path,
            "query": dict(request.query),
            "content_type": request.headers.get("CONTENT-TYPE"),
            "x_multi": request.headers.getlist("x-multi"),
            "body": request.body.decode("latin-1"),
        },
    )


def healthz(request: Request) -> Response:
    return json_response(200, {"healthy": True})


def boom(request: Request) -> Response:
    raise RuntimeError("token xoxb-secret-123 leaked into an exception")


def not_a_response(request: Request) -> Response:
    return "oops"  # type: ignore[return-value]


@pytest.fixture
def server() -> Iterator[HttpServer]:
    routes = [
        Route("GET", "/healthz", healthz),
        Route("POST", "/echo", echo),
        Route("PUT", "/echo", echo),
        Route("POST", "/boom", boom),
        Route("GET", "/not-a-response", not_a_response),
    ]
    srv = HttpServer("127.0.0.1", 0, routes, max_body_bytes=64)
    srv.start()
    yield srv
    srv.stop()


def request(
    srv: HttpServer,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


# -- the server ----------------------------------------------------------------------------------


def test_start_binds_a_free_port_and_serves(server: HttpServer) -> None:
    assert server.port > 0
    assert server.url == f"http://127.0.0.1:{server.port}"
    status, headers, body = request(server, "GET", "/healthz")
    assert (status, json.loads(body)) == (200, {"healthy": True})
    assert headers["content-type"] == "application/json; charset=utf-8"
    assert headers["content-length"] == str(len(body))


def test_request_carries_query_headers_and_raw_body(server: HttpServer) -> None:
    status, _, body = request(
        server,
        "POST",
        "/echo?a=1&a=2&empty=",
        b"\x00raw\xff",
        {"Content-Type": "application/octet-stream", "X-Multi": "one"},
    )
    assert status == 200
    assert json.loads(body) == {
        "method": "POST",
        "path": "/echo",
        "query": {"a": ["1", "2"], "empty": [""]},
        "content_type": "application/octet-stream",
        "x_multi": ["one"],
        "body": "\x00raw\xff",
    }


def test_unknown_path_is_404_json(server: HttpServer) -> None:
    status, headers, body = request(server, "GET", "/nope")
    assert (status, json.loads(body)) == (404, {"error": "not_found"})
    assert headers["content-type"].startswith("application/json")


def test_wrong_method_is_405_with_allow(server: HttpServer) -> None:
    status, headers, body = request(server, "DELETE", "/echo")
    assert (status, json.loads(body)) == (405, {"error": "method_not_allowed"})
    assert headers["allow"] == "POST, PUT"
    assert request(server, "POST", "/healthz")[2] == b'{"error":"method_not_allowed"}'


def test_head_is_served_by_the_get_route_without_body(server: HttpServer) -> None:
    status, headers, body = request(server, "HEAD", "/healthz")
    assert (status, body) == (200, b"")
    assert int(headers["content-length"]) > 0


def test_body_at_the_limit_is_accepted(server: HttpServer) -> None:
    assert request(server, "POST", "/echo", b"x" * 64)[0] == 200


def test_body_over_the_limit_is_413_before_it_is_sent(server: HttpServer) -> None:
    # Announce 10 MiB and send none of it: the answer must come from the headers alone.
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        conn.putrequest("POST", "/echo")
        conn.putheader("Content-Length", str(10 * 1024 * 1024))
        conn.endheaders()
        started = time.monotonic()
        resp = conn.getresponse()
        assert (resp.status, json.loads(resp.read())) == (413, {"error": "body_too_large"})
        assert time.monotonic() - started < 2
    finally:
        conn.close()


def test_a_chunked_body_is_411_as_json(server: HttpServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        reply = sock.makefile("rb").read()
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"411"
    assert json.loads(body) == {"error": "length_required"}


@pytest.mark.parametrize(
    "raw",
    [
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n",
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \xb2\r\n\r\n".encode("latin-1"),
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\ncontent-length: 6\r\n\r\n",
        b"GARBAGE\r\n\r\n",
        b"GET /" + b"a" * 20_000,  # a head still unfinished past MAX_HEAD_BYTES
    ],
)
def test_what_h11_cannot_frame_is_400_before_any_handler(server: HttpServer, raw: bytes) -> None:
    """A bad or repeated Content-Length, a malformed request line, a head over 16 KiB: h11
    refuses them itself (uvicorn's plain 400), and no handler runs."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(raw)
        reply = sock.makefile("rb").read()
    assert reply.split(b" ")[1] == b"400"


def test_handler_exception_is_a_generic_500_and_logged(
    server: HttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="lockguard.http"):
        status, _, body = request(server, "POST", "/boom", b"{}")
    assert (status, json.loads(body)) == (500, {"error": "internal_error"})
    assert b"xoxb" not in body
    [record] = [r for r in caplog.records if r.name == "lockguard.http"]
    assert record.getMessage() == "handler for POST /boom failed"
    assert record.exc_info is not None


def test_handler_returning_something_else_is_a_500(server: HttpServer) -> None:
    status, _, body = request(server, "GET", "/not-a-response")
    assert (status, json.loads(body)) == (500, {"error": "internal_error"})


def test_stop_closes_the_socket_and_is_idempotent() -> None:
    srv = HttpServer("127.0.0.1", 0, [Route("GET", "/healthz", healthz)])
    srv.stop()  # before start: nothing to do
    port = srv.start()
    srv.stop()
    srv.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_duplicate_routes_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate route: GET /healthz"):
        HttpServer(
            "127.0.0.1", 0, [Route("GET", "/healthz", healthz), Route("get", "/healthz", healthz)]
        )


# -- the signer ----------------------------------------------------------------------------------


def test_signer_matches_slack_sdk() -> None:
    body = slash_command_body(text="scan lock:*")
    ts = int(time.time())
    signature = SlackSigner(SECRET).signature(body, ts)
    verifier = SignatureVerifier(SECRET)
    assert signature == verifier.generate_signature(timestamp=str(ts), body=body)
    assert verifier.is_valid(body=body, timestamp=str(ts), signature=signature)
    bad = SlackSigner(SECRET).headers(body, bad_signature=True)
    assert not verifier.is_valid(
        body=body, timestamp=bad["X-Slack-Request-Timestamp"], signature=bad["X-Slack-Signature"]
    )
    stale = SlackSigner(SECRET).headers(body, stale=True)
    assert not verifier.is_valid(
        body=body,
        timestamp=stale["X-Slack-Request-Timestamp"],
        signature=stale["X-Slack-Signature"],
    )


# -- Bolt behind /slack/events -------------------------------------------------------------------


def build_app(fake: FakeSlack) -> App:
    app = App(
        client=WebClient(token="xoxb-test", base_url=fake.url),
        signing_secret=SECRET,
        token_verification_enabled=False,
    )

    @app.command("/lockguard")
    def lockguard(ack: Ack, command: dict[str, Any]) -> None:
        ack("hi" if not command["text"] else f"hi: {command['text']}")

    @app.action("x")
    def clicked(ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        ack()
        client.chat_update(
            channel=body["container"]["channel_id"],
            ts=body["container"]["message_ts"],
            text=f"approved by <@{body['user']['id']}>",
            blocks=[],
        )

    @app.action("respond")
    def respond_to_click(ack: Ack, respond: Respond) -> None:
        ack()
        respond(text="only approvers may decide", response_type="ephemeral", replace_original=False)

    @app.view("reject_reason")
    def rejected(ack: Ack, view: dict[str, Any]) -> None:
        reason = view["state"]["values"].get("reason", {}).get("text", {}).get("value")
        if reason:
            ack()
        else:
            ack(response_action="errors", errors={"reason": "Say why"})

    return app


@pytest.fixture
def slack_url(fake_slack: FakeSlack) -> Iterator[str]:
    srv = HttpServer("127.0.0.1", 0, [bolt_route(build_app(fake_slack))])
    srv.start()
    yield f"{srv.url}/slack/events"
    srv.stop()


def test_signed_slash_command_is_acked(slack_url: str, fake_slack: FakeSlack) -> None:
    reply = slash_command(slack_url, SECRET, text="")
    assert (reply.status, reply.text) == (200, "hi")
    assert reply.headers["content-type"].startswith("text/plain")
    # Bolt calls auth.test on the first request (token verification was off) and caches it.
    assert slash_command(slack_url, SECRET, text="status").text == "hi: status"
    assert len(fake_slack.calls("auth.test")) == 1


def test_slash_command_text_containing_payload_still_matches(slack_url: str) -> None:
    # Bolt alone parses this body to {} ("payload" occurs in it) and answers 404.
    reply = slash_command(slack_url, SECRET, text="scan payload:*")
    assert (reply.status, reply.text) == (200, "hi: scan payload:*")


def test_payload_workaround_keeps_real_interactivity_bodies() -> None:
    body = slash_command_body(text="x").encode()
    req = to_bolt_request(
        Request(
            "POST",
            "/slack/events",
            body=body,
            headers=Headers({"Content-Type": "application/x-www-form-urlencoded"}),
        )
    )
    assert req.body["text"] == "x"
    assert req.context.team_id == "T0LOCKGUARD"


def test_bad_signature_is_401(slack_url: str, fake_slack: FakeSlack) -> None:
    reply = slash_command(slack_url, SECRET, text="", bad_signature=True)
    assert (reply.status, reply.json()) == (401, {"error": "invalid request"})
    assert fake_slack.calls() == []


def test_stale_timestamp_is_401(slack_url: str) -> None:
    assert slash_command(slack_url, SECRET, text="", stale=True).status == 401


def test_non_utf8_body_is_400(slack_url: str) -> None:
    reply = post(slack_url, b"\xff\xfe", SlackSigner(SECRET).headers(b"\xff\xfe"))
    assert (reply.status, reply.json()) == (400, {"error": "invalid_body"})


def test_block_action_listener_updates_the_message(slack_url: str, fake_slack: FakeSlack) -> None:
    reply = block_action(
        slack_url,
        SECRET,
        action_id="x",
        value="case-1",
        user_id="U0BOB",
        channel_id="C0LOCKS",
        message_ts="1700000000.000100",
    )
    assert reply.status == 200
    [call] = fake_slack.wait_for("chat.update")
    # Bolt's per-request client adds the request's team_id to every Web API call.
    assert call.body == {
        "channel": "C0LOCKS",
        "ts": "1700000000.000100",
        "text": "approved by <@U0BOB>",
        "blocks": [],
        "team_id": "T0LOCKGUARD",
    }
    assert call.token == "xoxb-test"


def test_respond_goes_to_the_response_url(slack_url: str, fake_slack: FakeSlack) -> None:
    reply = block_action(
        slack_url,
        SECRET,
        action_id="respond",
        value="case-1",
        response_url=fake_slack.response_url("click-1"),
    )
    assert reply.status == 200
    [call] = fake_slack.wait_for("response_url")
    assert call.target == "click-1"
    assert call.body == {
        "text": "only approvers may decide",
        "response_type": "ephemeral",
        "replace_original": False,
    }


def test_unhandled_action_is_404(slack_url: str) -> None:
    reply = block_action(slack_url, SECRET, action_id="nobody-listens", value="v")
    assert reply.status == 404


def test_view_submission_is_acked(slack_url: str) -> None:
    values = {"reason": {"text": {"type": "plain_text_input", "value": "still in use"}}}
    reply = view_submission(
        slack_url, SECRET, callback_id="reject_reason", private_metadata="case-1", values=values
    )
    assert (reply.status, reply.body) == (200, b"")


def test_view_submission_errors_are_passed_back(slack_url: str) -> None:
    reply = view_submission(slack_url, SECRET, callback_id="reject_reason", values={})
    assert reply.status == 200
    assert reply.json() == {"response_action": "errors", "errors": {"reason": "Say why"}}
    assert reply.headers["content-type"].startswith("application/json")
