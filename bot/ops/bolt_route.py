"""`POST /slack/events`: a signed Slack request handed to a Bolt `App`, its answer sent back.

Bolt checks the signature (401), answers `ssl_check` and `url_verification`, and waits for the
listener's `ack()`. It needs the raw body as text, byte for byte what Slack signed (a body that is
not UTF-8 cannot be signed: 400 here), and header values as `str` or `list` (a tuple raises).
Bolt tells an interactivity payload from a plain form by `"payload" in body`, so a slash command
whose text holds the word would parse to `{}`: `to_bolt_request` re-parses such a body as the
form it is (the signature is still checked over the untouched raw body).
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import parse_qs, parse_qsl

from slack_bolt import App, BoltContext, BoltRequest, BoltResponse
from slack_bolt.request.internals import build_context

from bot.ops.http_server import Request, Response, Route, error_response

SLACK_EVENTS_PATH = "/slack/events"
_FORM = "application/x-www-form-urlencoded"


def to_bolt_request(request: Request) -> BoltRequest:
    """UnicodeDecodeError on a non-UTF-8 body."""
    raw = request.body.decode("utf-8")
    headers: dict[str, str | Sequence[str]] = {
        name: request.headers.getlist(name) for name in request.headers
    }
    query: dict[str, Sequence[str]] = {name: list(values) for name, values in request.query.items()}
    bolt_request = BoltRequest(body=raw, query=query, headers=headers)
    if _lost_to_payload_sniffing(bolt_request):
        bolt_request.body = dict(parse_qsl(raw, keep_blank_values=True))
        bolt_request.context = build_context(BoltContext({}), bolt_request.body)
    return bolt_request


def _lost_to_payload_sniffing(bolt_request: BoltRequest) -> bool:
    """True when Bolt parsed a plain form body to `{}` because the word "payload" occurs in it."""
    raw = bolt_request.raw_body
    if bolt_request.body or not raw or raw.startswith("{") or "payload" not in raw:
        return False
    if bolt_request.content_type not in (None, _FORM):
        return False
    return "payload" not in parse_qs(raw, keep_blank_values=True)


def from_bolt_response(bolt_response: BoltResponse) -> Response:
    response = Response(bolt_response.body.encode("utf-8"), int(bolt_response.status))
    for name, values in bolt_response.headers.items():
        if name.lower() not in ("content-length", "connection", "transfer-encoding"):
            for value in values:
                response.headers.append(name, str(value))
    return response


def bolt_route(app: App) -> Route:
    """`POST /slack/events` -> `app`, blocking until the listener acks."""

    def handle(request: Request) -> Response:
        try:
            bolt_request = to_bolt_request(request)
        except UnicodeDecodeError:
            return error_response(400, "invalid_body")
        return from_bolt_response(app.dispatch(bolt_request))

    return Route("POST", SLACK_EVENTS_PATH, handle)
