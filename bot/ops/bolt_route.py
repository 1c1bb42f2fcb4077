"""`POST /slack/events`: hand a signed Slack request to a Bolt `App` and send back its answer.

Bolt does the rest: signature and timestamp checks (401 on failure), `ssl_check` and
`url_verification`, matching a listener, and waiting for its `ack()` (the listener keeps running
on Bolt's executor after the ack has been answered).

What Bolt needs from an adapter, and what this one does about it:

- `BoltRequest(body=<str>)` in HTTP mode: the raw body as text, byte-for-byte what Slack signed.
  A body that is not UTF-8 cannot carry a valid signature; it is answered 400 before Bolt.
- `headers` values must be a `str` or a `list` of str (a tuple raises ValueError inside Bolt);
  names are lower-cased by Bolt. `query` likewise takes `{name: [values]}`.
- Bolt decides "interactivity payload or plain form" with a substring test (`"payload" in body`),
  so a slash command whose text contains the word (`/lockguard scan payload:*`) parses to an empty
  body and no listener matches. `to_bolt_request` re-parses such bodies as the plain form they are
  (the signature is still checked over the untouched raw body).
- `BoltResponse` carries `status`, `body: str` and `headers: {lower-case name: [values]}` with a
  `content-type` always set; all of it is passed through.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import parse_qs, parse_qsl

from slack_bolt import App, BoltContext, BoltRequest, BoltResponse
from slack_bolt.request.internals import build_context

from bot.ops.http_server import Handler, Request, Response, Route, error_response

SLACK_EVENTS_PATH = "/slack/events"
_FORM = "application/x-www-form-urlencoded"


def to_bolt_request(request: Request) -> BoltRequest:
    """Our `Request` as an HTTP-mode `BoltRequest`; UnicodeDecodeError on a non-UTF-8 body."""
    raw = request.body.decode("utf-8")
    # Values must be real lists: Bolt accepts `str` or `list`, and raises on a tuple.
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


def bolt_handler(app: App) -> Handler:
    """A route handler that dispatches every request to `app` (blocks until the listener acks,
    at most its ack timeout)."""

    def handle(request: Request) -> Response:
        try:
            bolt_request = to_bolt_request(request)
        except UnicodeDecodeError:
            return error_response(400, "invalid_body")
        return from_bolt_response(app.dispatch(bolt_request))

    return handle


def bolt_route(app: App, path: str = SLACK_EVENTS_PATH) -> Route:
    """`POST <path>` -> `app`. Slack sends slash commands and interactivity as POSTs only."""
    return Route("POST", path, bolt_handler(app))
