"""Signed Slack requests, sent over real HTTP to a running server (the tests' side of Slack).

Slack signs `v0:{timestamp}:{raw body}` with the app's signing secret (HMAC-SHA256, hex, "v0="
prefix) and sends it as `X-Slack-Signature` next to `X-Slack-Request-Timestamp`; the receiver
rejects signatures that do not match and timestamps more than five minutes away from its clock.

- `slash_command(url, secret, text=..., ...)`: the form body of a slash command.
- `block_action(url, secret, action_id=..., value=..., ...)`, `view_submission(url, secret, ...)`:
  interactivity, sent as the form field `payload=<json>`.
- `event_callback(url, secret, event={...})`: an Events API delivery (`app_home_opened`, ...), the
  JSON body Slack posts with `type: event_callback` around the event; `app_home_opened(user_id)`
  builds that event.
- Every sender takes `bad_signature=True` (signed with another secret), `stale=True` (a timestamp
  ten minutes old, correctly signed) or an explicit `timestamp`, and `headers` to add (Slack's
  redelivery: `{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}`), and
  returns a `SlackReply` `(status, headers, body)`.
- The `*_body` / `*_payload` builders give the same bodies without sending them.
- As from Slack, every request is a new one: its `trigger_id` (and a click's `action_ts`) is
  fresh unless given, so two clicks in the same second are two requests, not one replayed
  (`bot.slack.replays` drops a request whose signature and timestamp it has seen).

Requests go out with `http.client` directly, so no HTTP(S)_PROXY setting can intercept them.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import itertools
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple
from urllib.parse import urlencode, urlsplit

FORM = "application/x-www-form-urlencoded"
STALE_SECONDS = 600  # Slack's (and Bolt's) window is 5 minutes

DEFAULT_TEAM = "T0LOCKGUARD"
DEFAULT_USER = "U0ALICE"
DEFAULT_CHANNEL = "C0LOCKS"
#: The headers of a redelivery by Slack (which lockguard acks and drops).
REDELIVERY = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
DEFAULT_MESSAGE_TS = "1700000000.000100"
DEFAULT_TRIGGER = "1337.4242.0123456789abcdef"
_SEQ = itertools.count(1)


def fresh_trigger() -> str:
    """A trigger id no other request of this test session has: `<seconds>.<n>.<hex>`."""
    return f"{int(time.time())}.{next(_SEQ)}.0123456789abcdef"


class SlackSigner:
    """`SlackSigner(secret).signature(body, timestamp)` -> "v0=<hex>"; `headers(body)` -> the two
    signature headers (and content type) for a request sent now (`clock` is injectable)."""

    def __init__(self, secret: str, *, clock: Callable[[], float] = time.time) -> None:
        self.secret = secret
        self.clock = clock

    def signature(self, body: str | bytes, timestamp: int | str) -> str:
        raw = body.encode("utf-8") if isinstance(body, str) else body
        base = b"v0:" + str(timestamp).encode("ascii") + b":" + raw
        digest = hmac.new(self.secret.encode("utf-8"), base, hashlib.sha256).hexdigest()
        return "v0=" + digest

    def headers(
        self,
        body: str | bytes,
        *,
        timestamp: int | None = None,
        bad_signature: bool = False,
        stale: bool = False,
        content_type: str = FORM,
    ) -> dict[str, str]:
        ts = timestamp if timestamp is not None else int(self.clock())
        if stale:
            ts -= STALE_SECONDS
        signer = SlackSigner(self.secret + "-wrong") if bad_signature else self
        return {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": str(ts),
            "X-Slack-Signature": signer.signature(body, ts),
        }


class SlackReply(NamedTuple):
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")

    def json(self) -> Any:
        return json.loads(self.body)


def post(url: str, body: bytes, headers: Mapping[str, str], *, timeout: float = 10.0) -> SlackReply:
    """POST `body` to `url` with exactly these headers (plus Host and Content-Length)."""
    split = urlsplit(url)
    if split.scheme != "http" or split.hostname is None:
        raise ValueError(f"expected an http:// URL, got {url!r}")
    conn = http.client.HTTPConnection(split.hostname, split.port or 80, timeout=timeout)
    try:
        target = (split.path or "/") + (f"?{split.query}" if split.query else "")
        conn.request("POST", target, body=body, headers=dict(headers))
        response = conn.getresponse()
        return SlackReply(
            response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        )
    finally:
        conn.close()


def send_signed(
    url: str,
    secret: str,
    body: str,
    *,
    content_type: str = FORM,
    bad_signature: bool = False,
    stale: bool = False,
    timestamp: int | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> SlackReply:
    signed = SlackSigner(secret).headers(
        body,
        timestamp=timestamp,
        bad_signature=bad_signature,
        stale=stale,
        content_type=content_type,
    )
    return post(url, body.encode("utf-8"), {**signed, **(headers or {})}, timeout=timeout)


# -- slash commands ------------------------------------------------------------------------------


def slash_command_body(
    *,
    text: str = "",
    user_id: str = DEFAULT_USER,
    channel_id: str = DEFAULT_CHANNEL,
    team_id: str = DEFAULT_TEAM,
    response_url: str | None = None,
    command: str = "/lockguard",
    trigger_id: str | None = None,
    user_name: str = "alice",
    channel_name: str = "locks",
) -> str:
    fields = {
        "token": "legacy-verification-token",
        "team_id": team_id,
        "team_domain": "lockguard-test",
        "channel_id": channel_id,
        "channel_name": channel_name,
        "user_id": user_id,
        "user_name": user_name,
        "command": command,
        "text": text,
        "api_app_id": "A0LOCKGUARD",
        "is_enterprise_install": "false",
        "trigger_id": trigger_id or fresh_trigger(),
    }
    if response_url is not None:
        fields["response_url"] = response_url
    return urlencode(fields)


def slash_command(
    url: str,
    secret: str,
    *,
    text: str = "",
    user_id: str = DEFAULT_USER,
    channel_id: str = DEFAULT_CHANNEL,
    team_id: str = DEFAULT_TEAM,
    response_url: str | None = None,
    command: str = "/lockguard",
    trigger_id: str | None = None,
    bad_signature: bool = False,
    stale: bool = False,
    timestamp: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> SlackReply:
    body = slash_command_body(
        text=text,
        user_id=user_id,
        channel_id=channel_id,
        team_id=team_id,
        response_url=response_url,
        command=command,
        trigger_id=trigger_id,
    )
    return send_signed(
        url,
        secret,
        body,
        bad_signature=bad_signature,
        stale=stale,
        timestamp=timestamp,
        headers=headers,
    )


# -- interactivity -------------------------------------------------------------------------------


def interactive_body(payload: Mapping[str, Any]) -> str:
    """The form body Slack posts for interactivity: one field, `payload`, holding JSON."""
    return urlencode({"payload": json.dumps(payload, separators=(",", ":"))})


def send_payload(
    url: str,
    secret: str,
    payload: Mapping[str, Any],
    *,
    bad_signature: bool = False,
    stale: bool = False,
    timestamp: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> SlackReply:
    return send_signed(
        url,
        secret,
        interactive_body(payload),
        bad_signature=bad_signature,
        stale=stale,
        timestamp=timestamp,
        headers=headers,
    )


def _user(user_id: str, team_id: str) -> dict[str, str]:
    return {"id": user_id, "username": user_id.lower(), "name": user_id.lower(), "team_id": team_id}


def block_action_payload(
    *,
    action_id: str,
    value: str,
    user_id: str = DEFAULT_USER,
    team_id: str = DEFAULT_TEAM,
    channel_id: str = DEFAULT_CHANNEL,
    message_ts: str = DEFAULT_MESSAGE_TS,
    response_url: str | None = None,
    trigger_id: str | None = None,
    block_id: str = "lockguard_case",
    message: Mapping[str, Any] | None = None,
    text: str | None = None,
) -> dict[str, Any]:
    """A `block_actions` payload for a button click on a message in a channel (`text`: the
    button's, as Slack sends it; default its action id)."""
    shown = (
        dict(message)
        if message is not None
        else {
            "type": "message",
            "text": "lockguard",
            "user": "U0LOCKBOT",
            "bot_id": "B0LOCKBOT",
            "blocks": [],
        }
    )
    shown["ts"] = message_ts
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": _user(user_id, team_id),
        "api_app_id": "A0LOCKGUARD",
        "token": "legacy-verification-token",
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel_id,
            "is_ephemeral": False,
        },
        "trigger_id": trigger_id or fresh_trigger(),
        "team": {"id": team_id, "domain": "lockguard-test"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel_id, "name": "locks"},
        "message": shown,
        "state": {"values": {}},
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": block_id,
                "text": {"type": "plain_text", "text": text or action_id, "emoji": True},
                "value": value,
                "action_ts": f"{int(time.time())}.{next(_SEQ):06d}",
            }
        ],
    }
    if response_url is not None:
        payload["response_url"] = response_url
    return payload


def block_action(
    url: str,
    secret: str,
    *,
    action_id: str,
    value: str,
    user_id: str = DEFAULT_USER,
    team_id: str = DEFAULT_TEAM,
    channel_id: str = DEFAULT_CHANNEL,
    message_ts: str = DEFAULT_MESSAGE_TS,
    response_url: str | None = None,
    trigger_id: str | None = None,
    block_id: str = "lockguard_case",
    message: Mapping[str, Any] | None = None,
    text: str | None = None,
    bad_signature: bool = False,
    stale: bool = False,
    timestamp: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> SlackReply:
    payload = block_action_payload(
        action_id=action_id,
        value=value,
        user_id=user_id,
        team_id=team_id,
        channel_id=channel_id,
        message_ts=message_ts,
        response_url=response_url,
        trigger_id=trigger_id,
        block_id=block_id,
        message=message,
        text=text,
    )
    return send_payload(
        url,
        secret,
        payload,
        bad_signature=bad_signature,
        stale=stale,
        timestamp=timestamp,
        headers=headers,
    )


def view_submission_payload(
    *,
    callback_id: str,
    private_metadata: str = "",
    values: Mapping[str, Any] | None = None,
    user_id: str = DEFAULT_USER,
    team_id: str = DEFAULT_TEAM,
    view_id: str = "V0LOCKVIEW",
    submit: str = "Submit",
) -> dict[str, Any]:
    """A `view_submission` payload. `values` is `view.state.values` as Slack sends it:
    `{block_id: {action_id: {"type": "plain_text_input", "value": "..."}}}`; `submit`, the
    text of the view's submit button."""
    return {
        "type": "view_submission",
        "team": {"id": team_id, "domain": "lockguard-test"},
        "user": _user(user_id, team_id),
        "api_app_id": "A0LOCKGUARD",
        "token": "legacy-verification-token",
        "trigger_id": fresh_trigger(),
        "view": {
            "id": view_id,
            "team_id": team_id,
            "type": "modal",
            "blocks": [],
            "private_metadata": private_metadata,
            "callback_id": callback_id,
            "state": {"values": dict(values or {})},
            "hash": "1700000000.hash",
            "title": {"type": "plain_text", "text": "lockguard"},
            "close": {"type": "plain_text", "text": "Cancel"},
            "submit": {"type": "plain_text", "text": submit},
            "previous_view_id": None,
            "root_view_id": view_id,
            "app_id": "A0LOCKGUARD",
            "external_id": "",
            "bot_id": "B0LOCKBOT",
        },
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }


def view_submission(
    url: str,
    secret: str,
    *,
    callback_id: str,
    private_metadata: str = "",
    values: Mapping[str, Any] | None = None,
    user_id: str = DEFAULT_USER,
    team_id: str = DEFAULT_TEAM,
    view_id: str = "V0LOCKVIEW",
    submit: str = "Submit",
    bad_signature: bool = False,
    stale: bool = False,
    timestamp: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> SlackReply:
    payload = view_submission_payload(
        callback_id=callback_id,
        private_metadata=private_metadata,
        values=values,
        user_id=user_id,
        team_id=team_id,
        view_id=view_id,
        submit=submit,
    )
    return send_payload(
        url,
        secret,
        payload,
        bad_signature=bad_signature,
        stale=stale,
        timestamp=timestamp,
        headers=headers,
    )


# -- the Events API ------------------------------------------------------------------------------


def app_home_opened(
    user_id: str = DEFAULT_USER, *, tab: str = "home", channel_id: str = "D0LOCKHOME"
) -> dict[str, Any]:
    """The event Slack sends when a person opens the app's Home (or Messages) tab."""
    return {
        "type": "app_home_opened",
        "user": user_id,
        "channel": channel_id,
        "tab": tab,
        "event_ts": f"{time.time():.6f}",
    }


def event_callback_body(
    event: Mapping[str, Any], *, team_id: str = DEFAULT_TEAM, event_id: str = "Ev0LOCKGUARD1"
) -> str:
    return json.dumps(
        {
            "token": "legacy-verification-token",
            "team_id": team_id,
            "api_app_id": "A0LOCKGUARD",
            "event": dict(event),
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": team_id,
                    "user_id": "U0LOCKBOT",
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
        },
        separators=(",", ":"),
    )


def event_callback(
    url: str,
    secret: str,
    *,
    event: Mapping[str, Any],
    team_id: str = DEFAULT_TEAM,
    event_id: str = "Ev0LOCKGUARD1",
    bad_signature: bool = False,
    stale: bool = False,
    timestamp: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> SlackReply:
    """An Events API delivery: signed JSON, as Slack posts it to the request URL."""
    return send_signed(
        url,
        secret,
        event_callback_body(event, team_id=team_id, event_id=event_id),
        content_type="application/json",
        bad_signature=bad_signature,
        stale=stale,
        timestamp=timestamp,
        headers=headers,
    )
