"""The Slack half of `lockguard demo`: the real app, a stand-in Slack, and a person's clicks.

    with SlackDemo(engine) as slack:          # stand-in Web API + `lockguard serve` (HTTP mode)
        slack.slash("scan")                    # /lockguard scan, signed like Slack signs it
        post = slack.findings()                # the message the app posted, with its buttons
        slack.click(APPROVE, case_id, post)    # the Approve button, through the signed endpoint
        after = slack.settled(case_id, post)   # the message once the app updated it

`serve.start` runs for real in HTTP mode on 127.0.0.1, on the demo's engine, with a signing
secret made for this run and a bot token only the stand-in takes; no schedule runs. Nothing of
the user's is read: no environment, no `.env`, no Slack workspace.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import io
import json
import os
import secrets
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from types import TracebackType
from typing import Any, NamedTuple
from urllib.parse import urlencode, urlsplit

from bot import serve
from bot.cases.case import Case, State
from bot.config import load_settings
from bot.demo.embedded import free_port
from bot.demo.slack_wire import Call
from bot.demo.standin import SlackStandIn
from bot.engine import Engine
from bot.ops.bolt_route import SLACK_EVENTS_PATH
from bot.slack.blocks import ids
from bot.slack.blocks.case_message import state_word
from bot.slack.blocks.render_text import mrkdwn_to_text, render_message

TEAM = "T0DEMO"
CHANNEL = "C0DEMOLOCKS"
USER = "U0DEMOOPERATOR"
#: How the renderer shows the demo's people: `<@U0DEMOOPERATOR>` as `@demo-operator`.
USERS = {USER: "demo-operator"}
TOKEN = "xoxb-lockguard-demo-not-a-real-token"
FINAL = (State.RELEASED, State.INCOMPLETE, State.REJECTED, State.EXPIRED)
# slack_sdk sends even loopback calls through these when set (it ignores NO_PROXY): they are
# left out while the app's Web API clients are made, so the demo reaches its stand-in.
_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")


class Reply(NamedTuple):
    status: int
    body: str


def signature(secret: str, timestamp: int, body: str) -> str:
    base = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def post_signed(
    url: str, secret: str, body: str, content_type: str = "application/x-www-form-urlencoded"
) -> Reply:
    """POST `body` (a form, or JSON for the Events API) to `url` signed as Slack signs it
    (http.client: no proxy applies)."""
    ts = int(time.time())
    split = urlsplit(url)
    conn = http.client.HTTPConnection(split.hostname or "127.0.0.1", split.port or 80, timeout=10)
    try:
        conn.request(
            "POST",
            split.path or "/",
            body=body.encode(),
            headers={
                "Content-Type": content_type,
                "X-Slack-Request-Timestamp": str(ts),
                "X-Slack-Signature": signature(secret, ts, body),
            },
        )
        response = conn.getresponse()
        return Reply(response.status, response.read().decode("utf-8", "replace"))
    finally:
        conn.close()


@contextmanager
def _without_proxy_settings() -> Iterator[None]:
    saved = {name: os.environ.pop(name) for name in _PROXY_VARIABLES if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def _redis_env(engine: Engine) -> dict[str, str]:
    """REDIS_HOST/PORT of the demo's Redis, in case anything reads them instead of the engine:
    the embedded server's, or (fakeredis) a closed port, never the user's Redis."""
    kwargs = getattr(engine.client.connection_pool, "connection_kwargs", {})
    if type(engine.client).__module__.startswith("fakeredis") or "port" not in kwargs:
        return {"REDIS_HOST": "127.0.0.1", "REDIS_PORT": str(free_port())}
    return {"REDIS_HOST": str(kwargs.get("host", "127.0.0.1")), "REDIS_PORT": str(kwargs["port"])}


class SlackDemo:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.secret = secrets.token_hex(16)
        self.standin = SlackStandIn(team_id=TEAM)
        self.served: serve.Served | None = None
        self.started_line = ""

    def start(self) -> SlackDemo:
        self.standin.start()
        settings = load_settings(
            env={
                **_redis_env(self.engine),
                "SLACK_BOT_TOKEN": TOKEN,
                "SLACK_SIGNING_SECRET": self.secret,
                "SLACK_API_URL": self.standin.url,
                "LOCKGUARD_SLACK_CHANNEL": CHANNEL,
                "LOCKGUARD_HTTP_HOST": "127.0.0.1",
                "LOCKGUARD_APPROVERS": "*",  # the demo's user approves: anyone may
                "LOCKGUARD_DRY_RUN": "false",
                "LOCKGUARD_SCAN_SCHEDULE": "off",
                "LOCKGUARD_DIGEST_SCHEDULE": "off",
            }
        )
        log = io.StringIO()
        try:
            with _without_proxy_settings():
                self.served = serve.start(settings, engine=self.engine, port=0, err=log)
        except BaseException:
            self.standin.stop()
            raise
        self.started_line = log.getvalue().strip()
        return self

    def stop(self) -> None:
        served, self.served = self.served, None
        if served is not None:
            served.stop()
        self.standin.stop()

    def __enter__(self) -> SlackDemo:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def events_url(self) -> str:
        if self.served is None:
            raise RuntimeError("the demo's Slack app is not started")
        return self.served.url + SLACK_EVENTS_PATH

    # -- what a person does in Slack ------------------------------------------------------------

    def slash(self, text: str) -> Reply:
        """The form Slack posts for `/lockguard <text>` typed by the operator in the channel."""
        form = {
            "token": "unused",
            "team_id": TEAM,
            "team_domain": "lockguard-demo",
            "channel_id": CHANNEL,
            "channel_name": "locks",
            "user_id": USER,
            "user_name": USERS[USER],
            "command": ids.COMMAND,
            "text": text,
            "api_app_id": "A0LOCKGUARD",
            "is_enterprise_install": "false",
            "response_url": self.standin.response_url("slash"),
            "trigger_id": f"{int(time.time())}.demo.slash",
        }
        return post_signed(self.events_url, self.secret, urlencode(form))

    def click(self, action_id: str, value: str, post: Call) -> Reply:
        """A button of the message `post` (a chat.postMessage call) clicked by the operator."""
        ts, channel = str(post.response.get("ts")), str(post.response.get("channel"))
        return self._interact(
            "block_actions",
            "click",
            {
                "container": {
                    "type": "message",
                    "message_ts": ts,
                    "channel_id": channel,
                    "is_ephemeral": False,
                },
                "channel": {"id": channel, "name": "locks"},
                "message": self.standin.message(channel, ts) or {},
                "state": {"values": {}},
                "response_url": self.standin.response_url("click"),
                "actions": [
                    {
                        "type": "button",
                        "action_id": action_id,
                        "value": value,
                        "block_id": ids.DECISION_BLOCK,
                        "action_ts": f"{time.time():.6f}",
                    }
                ],
            },
        )

    def submit_reject(self, view: Mapping[str, Any], reason: str) -> Reply:
        """The reject modal `view` (as the app opened it) submitted with `reason`."""
        field = {ids.REJECT_REASON_ACTION: {"type": "plain_text_input", "value": reason}}
        state = {"values": {ids.REJECT_REASON_BLOCK: field}}
        return self._interact(
            "view_submission", "submit", {"response_urls": [], "view": {**view, "state": state}}
        )

    def open_home(self) -> Reply:
        """The operator opens the app's Home tab: the Events API's `app_home_opened`."""
        event = {
            "type": "app_home_opened",
            "user": USER,
            "channel": "D0DEMOHOME",
            "tab": "home",
            "event_ts": f"{time.time():.6f}",
        }
        body = json.dumps(
            {
                "token": "demo",
                "team_id": TEAM,
                "api_app_id": "A0DEMO",
                "event": event,
                "type": "event_callback",
                "event_id": "Ev0DEMOHOME",
                "event_time": int(time.time()),
            },
            separators=(",", ":"),
        )
        return post_signed(self.events_url, self.secret, body, "application/json")

    def home_view(self) -> dict[str, Any]:
        """The Home tab the app published (views.publish) for the operator."""
        view = self.standin.wait_for("views.publish", timeout=10)[-1].body.get("view")
        return dict(view) if isinstance(view, dict) else {}

    def post_digest(self) -> dict[str, Any]:
        """The digest the schedule posts (LOCKGUARD_DIGEST_SCHEDULE), posted now."""
        if self.served is None:
            raise RuntimeError("the demo's Slack app is not started")
        before = len(self.standin.calls("chat.postMessage"))
        self.served.ops.post_digest()  # the demo serves one Redis: its own digest
        return dict(self.standin.wait_for("chat.postMessage", before + 1, timeout=10)[-1].body)

    def _interact(self, kind: str, trigger: str, fields: dict[str, Any]) -> Reply:
        """An interaction of the operator's, posted as Slack posts it."""
        payload = {
            "type": kind,
            "user": {"id": USER, "username": USERS[USER], "name": USERS[USER], "team_id": TEAM},
            "api_app_id": "A0LOCKGUARD",
            "team": {"id": TEAM, "domain": "lockguard-demo"},
            "is_enterprise_install": False,
            "trigger_id": f"{int(time.time())}.demo.{trigger}",
            **fields,
        }
        body = urlencode({"payload": json.dumps(payload, separators=(",", ":"))})
        return post_signed(self.events_url, self.secret, body)

    # -- what the app did -----------------------------------------------------------------------

    def findings(self) -> Call:
        """The findings message the app posted for a scan: the one with the Approve button."""
        return self.standin.wait_for(
            "chat.postMessage", timeout=30, where=lambda c: bool(approve_value(c.body))
        )[0]

    def opened_view(self) -> dict[str, Any]:
        view = self.standin.wait_for("views.open", timeout=10)[-1].response.get("view")
        return dict(view) if isinstance(view, dict) else {}

    def settled(self, case_id: str, post: Call) -> dict[str, Any]:
        """The message of `post` once the case is done in Redis and the message says so."""
        channel, ts = str(post.response.get("channel")), str(post.response.get("ts"))
        deadline = time.monotonic() + 30
        while True:
            case: Case = self.engine.case(case_id)
            held = self.standin.message(channel, ts) or {}
            now = self.engine.now_ms()
            if (
                case.effective_state(now) in FINAL
                and self.standin.calls("chat.update")
                and state_word(case, now) in str(held.get("text") or "")
            ):
                return held
            if time.monotonic() > deadline:
                seen = ", ".join(c.method for c in self.standin.calls())
                raise TimeoutError(
                    f"case {case_id} is {case.state.value}; its message was not "
                    f"updated within 30s (the stand-in received: {seen})"
                )
            time.sleep(0.05)


def approve_value(message: Mapping[str, Any]) -> str:
    """The case id the Approve button of a message carries ("" when it has none)."""
    for block in message.get("blocks") or []:
        for el in block.get("elements") or [] if block.get("type") == "actions" else []:
            if isinstance(el, Mapping) and el.get("action_id") == ids.APPROVE:
                return str(el.get("value") or "")
    return ""


def person(user_id: str) -> str:
    """`@demo-operator` for the demo's Slack user id; any other actor as recorded."""
    name = USERS.get(user_id)
    return f"@{name}" if name else user_id


def people(text: str) -> str:
    """`text` with each of the demo's Slack user ids written as the name Slack shows."""
    for user_id in USERS:
        text = text.replace(user_id, person(user_id))
    return text


def shown(message: Mapping[str, Any], pad: str = "   | ") -> str:
    """A Slack message as the terminal shows it, framed so that it reads as one message."""
    return "\n".join(pad + line for line in render_message(message, USERS).splitlines())


def answered(reply: Reply) -> str:
    """What the app's HTTP answer said (an ack's text: JSON, or the text itself), in one line."""
    text = reply.body.strip()
    if text.startswith("{"):
        with suppress(ValueError):
            parsed = json.loads(text)
            text = str(parsed.get("text") or "") if isinstance(parsed, dict) else text
    text = " ".join(mrkdwn_to_text(text, USERS).split())
    return f"HTTP {reply.status}" + (f", answered: {text[:200]}" if text else "")
