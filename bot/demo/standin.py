"""A local stand-in for Slack's Web API, for `lockguard demo`: the app talks to it as to Slack.

    with SlackStandIn() as slack:                    # 127.0.0.1, a free port, daemon threads
        settings: SLACK_API_URL=slack.url, SLACK_BOT_TOKEN=xoxb-...
        post = slack.wait_for("chat.postMessage")[0]
        slack.message(post.body["channel"], post.response["ts"])   # as updated since

It answers the methods lockguard calls, as Slack documents them, and records every call in
order (thread-safely): `auth.test`, `chat.postMessage`, `chat.update` (of a message it holds),
`chat.postEphemeral`, `views.open`, `views.publish`, `usergroups.users.list` (from `usergroups`),
and `POST /response_url/<id>` (where Bolt's `respond()` goes when a request carries
`response_url`). A call without a bot token is `not_authed`, an unknown method
`unknown_method`, a message with neither text nor blocks `no_text`, like Slack. It checks no
Block Kit and keeps nothing on disk: it is what a newcomer's demo needs, not a test harness
(the tests have their own, richer one).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

#: Fields that Slack takes as JSON even in a form-encoded body.
JSON_FIELDS = ("blocks", "attachments", "view", "metadata")
Answer = Callable[["SlackStandIn", dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Call:
    method: str  # "chat.postMessage"; "response_url" for POST /response_url/<id>
    body: dict[str, Any]
    response: dict[str, Any] = field(default_factory=dict)


def parse_body(content_type: str, raw: bytes, query: str = "") -> dict[str, Any]:
    """A JSON or form-encoded body, with the query string, as one dict."""
    out: dict[str, Any] = {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}
    text = raw.decode("utf-8", "replace")
    if content_type.split(";")[0].strip().lower() == "application/json":
        parsed = json.loads(text) if text.strip() else {}
        out.update(parsed if isinstance(parsed, dict) else {})
        return out
    out.update({k: v[0] for k, v in parse_qs(text, keep_blank_values=True).items()})
    for name in JSON_FIELDS:
        value = out.get(name)
        if isinstance(value, str) and value[:1] in ("[", "{"):
            with contextlib.suppress(ValueError):
                out[name] = json.loads(value)
    return out


class SlackStandIn:
    def __init__(
        self,
        *,
        team_id: str = "T0DEMO",
        team: str = "lockguard-demo",
        bot_user_id: str = "U0LOCKGUARD",
        bot_id: str = "B0LOCKGUARD",
        usergroups: Mapping[str, list[str]] | None = None,
    ) -> None:
        self.team_id, self.team, self.bot_user_id, self.bot_id = team_id, team, bot_user_id, bot_id
        self._groups = {k: list(v) for k, v in (usergroups or {}).items()}
        self._calls: list[Call] = []
        self._messages: dict[tuple[str, str], dict[str, Any]] = {}
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> SlackStandIn:
        if self._server is None:
            handler = type("_BoundHandler", (_Handler,), {"standin": self})
            server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            server.daemon_threads = True
            threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="slack-standin",
                daemon=True,
            ).start()
            self._server = server
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> SlackStandIn:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base(self) -> str:
        if self._server is None:
            raise RuntimeError("the Slack stand-in is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}/"

    @property
    def url(self) -> str:
        """The Web API base URL, for SLACK_API_URL (ends in "/")."""
        return self.base + "api/"

    def response_url(self, name: str) -> str:
        return f"{self.base}response_url/{name}"

    def calls(self, method: str | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self._calls if method is None or c.method == method]

    def wait_for(
        self,
        method: str,
        count: int = 1,
        timeout: float = 20.0,
        where: Callable[[Call], bool] | None = None,
    ) -> list[Call]:
        """The calls of `method` (that `where` accepts) once there are `count`; TimeoutError
        naming what arrived when there are not within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            got = [c for c in self.calls(method) if where is None or where(c)]
            if len(got) >= count or time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        if len(got) < count:
            seen = ", ".join(c.method for c in self.calls()) or "nothing"
            raise TimeoutError(
                f"the Slack stand-in waited {timeout:g}s for {method}; it received: {seen}"
            )
        return got

    def message(self, channel: str, ts: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._messages.get((channel, ts))
            return dict(found) if found is not None else None

    # -- answers -------------------------------------------------------------------------------

    def answer(self, method: str, body: dict[str, Any], token: str) -> dict[str, Any]:
        if not token:
            return {"ok": False, "error": "not_authed"}
        handler = _ANSWERS.get(method)
        return (
            handler(self, body) if handler is not None else {"ok": False, "error": "unknown_method"}
        )

    def record(self, call: Call) -> None:
        with self._lock:
            self._calls.append(call)

    def _ts(self) -> str:
        return f"{int(time.time())}.{next(self._seq):06d}"

    def _auth_test(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": f"https://{self.team}.slack.com/",
            "team": self.team,
            "user": "lockguard",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        channel = str(body.get("channel") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not body.get("text") and not body.get("blocks"):
            return {"ok": False, "error": "no_text"}
        ts = self._ts()
        message = {
            "type": "message",
            "text": body.get("text", ""),
            "blocks": body.get("blocks") or [],
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "ts": ts,
        }
        if body.get("thread_ts"):
            message["thread_ts"] = body["thread_ts"]
        with self._lock:
            self._messages[(channel, ts)] = message
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _update(self, body: dict[str, Any]) -> dict[str, Any]:
        channel, ts = str(body.get("channel") or ""), str(body.get("ts") or "")
        with self._lock:
            message = self._messages.get((channel, ts))
            if message is None:
                return {"ok": False, "error": "message_not_found"}
            message.update({k: body[k] for k in ("text", "blocks") if k in body})
            echo = dict(message)
        return {
            "ok": True,
            "channel": channel,
            "ts": ts,
            "text": echo.get("text", ""),
            "message": echo,
        }

    def _ephemeral(self, body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("channel") or not body.get("user"):
            return {
                "ok": False,
                "error": "channel_not_found" if not body.get("channel") else "user_not_in_channel",
            }
        return {"ok": True, "message_ts": self._ts()}

    def _view(self, body: dict[str, Any]) -> dict[str, Any]:
        view = body.get("view")
        if not isinstance(view, dict):
            return {"ok": False, "error": "invalid_arguments"}
        n = next(self._seq)
        return {
            "ok": True,
            "view": {
                **view,
                "id": f"V{n:08d}",
                "team_id": self.team_id,
                "hash": f"{n}.demo",
                "state": {"values": {}},
                "bot_id": self.bot_id,
            },
        }

    def _group_users(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            users = self._groups.get(str(body.get("usergroup") or ""))
        if users is None:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": list(users)}


_ANSWERS: dict[str, Answer] = {
    "auth.test": SlackStandIn._auth_test,
    "chat.postMessage": SlackStandIn._post,
    "chat.update": SlackStandIn._update,
    "chat.postEphemeral": SlackStandIn._ephemeral,
    "views.open": SlackStandIn._view,
    "views.publish": SlackStandIn._view,
    "usergroups.users.list": SlackStandIn._group_users,
}


class _Handler(BaseHTTPRequestHandler):
    standin: SlackStandIn  # set on the per-server subclass

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        split = urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = parse_body(self.headers.get("Content-Type", ""), raw, split.query)
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        kind, _, name = split.path.strip("/").partition("/")
        status = 200
        if kind == "api" and name:
            auth = self.headers.get("Authorization", "")
            token = (
                auth[7:].strip()
                if auth.lower().startswith("bearer ")
                else str(body.get("token") or "")
            )
            method, reply = name, self.standin.answer(name, body, token)
        elif kind == "response_url" and name:
            method, reply = "response_url", {"ok": True}
        else:
            method, reply, status = split.path, {"ok": False, "error": "unknown_path"}, 404
        self.standin.record(Call(method, body, reply))
        payload = json.dumps(reply).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        if method == "auth.test":
            self.send_header("X-OAuth-Scopes", "chat:write,commands,usergroups:read")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass
