"""The local stand-in for Slack's Web API (`SLACK_API_URL=slack.url`) that `lockguard demo` and
the tests (`FakeSlack`) talk to, on 127.0.0.1.

Every request is recorded in arrival order as a `Call`: Web API methods under `/api/`,
`POST /response_url/<id>` (Bolt's `respond()`) and file uploads under `/upload/<id>`. A call
without a token is `not_authed`. `on_message(body)`, when set, sees every message sent: raising
makes the answer `invalid_blocks` (kept in `hook_errors`), a non-empty str is the error code.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from bot.demo.slack_wire import Call, CallLog, parse_body
from bot.demo.slack_workspace import MESSAGE_METHODS, SCOPES, Workspace

MessageHook = Callable[[dict[str, Any]], object]
Reply = tuple[int, dict[str, Any], dict[str, str]]


class SlackStandIn(CallLog):
    def __init__(
        self,
        *,
        team_id: str = "T0DEMO",
        team: str = "lockguard-demo",
        bot_user_id: str = "U0LOCKGUARD",
        bot_id: str = "B0LOCKGUARD",
        usergroups: Mapping[str, list[str]] | None = None,
        channel_members: Mapping[str, list[str]] | None = None,
        on_message: MessageHook | None = None,
        strict: bool = True,
    ) -> None:
        CallLog.__init__(self)
        self.workspace = Workspace(
            team_id=team_id,
            team=team,
            bot_user_id=bot_user_id,
            bot_id=bot_id,
            strict=strict,
            usergroups=usergroups,
            channel_members=channel_members,
        )
        self.on_message = on_message
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> SlackStandIn:
        if self._server is None:
            handler = type("_BoundHandler", (_Handler,), {"standin": self})
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            self._server.daemon_threads = True
            self.workspace.base = self.base
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.02},
                name="slack-standin",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        server, thread, self._server, self._thread = self._server, self._thread, None, None
        if server is not None and thread is not None:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)

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
        """The Web API base URL (ends in "/"): `WebClient(base_url=...)`, SLACK_API_URL."""
        return self.base + "api/"

    def response_url(self, response_id: str = "1") -> str:
        return f"{self.base}response_url/{response_id}"

    def message(self, channel: str, ts: str) -> dict[str, Any] | None:
        """The current state of a message posted (and maybe updated) through the stand-in."""
        return self.workspace.message(channel, ts)

    # -- answers -------------------------------------------------------------------------------

    def answer(self, method: str, body: dict[str, Any], token: str | None) -> Reply:
        if not token:
            return 200, {"ok": False, "error": "not_authed"}, {}
        if method in MESSAGE_METHODS and self.on_message is not None:
            try:
                verdict = self.on_message(body)
            except Exception as exc:
                self.hook_errors.append(exc)  # list.append is atomic
                return 200, {"ok": False, "error": "invalid_blocks", "errors": [str(exc)]}, {}
            if isinstance(verdict, str) and verdict:
                return 200, {"ok": False, "error": verdict}, {}
        headers = {"X-OAuth-Scopes": SCOPES} if method == "auth.test" else {}
        return 200, self.workspace.answer(method, body), headers

    def reply(
        self, path: str, query: str, headers: dict[str, str], raw: bytes
    ) -> tuple[Call, dict[str, str]]:
        """The call one HTTP request makes (recorded, with its answer) and the answer's extra
        headers."""
        kind, _, name = path.lstrip("/").partition("/")
        if kind == "upload":
            call = Call("upload", {"content": raw}, headers, path, 200, {"ok": True})
            self.record(call)
            return call, {}
        try:
            body = parse_body(headers.get("content-type", ""), raw, query)
        except ValueError as exc:  # includes JSON and UTF-8 errors
            body = {"_unparsed": raw, "_error": str(exc)}
        extra: dict[str, str] = {}
        answer: dict[str, Any]
        if kind == "response_url":
            method, status, answer = "response_url", 200, {"ok": True}
        elif kind == "api" and name:
            method = name
            token = Call(method, body, headers, path).token
            status, answer, extra = self.answer(method, body, token)
        else:
            method, status, answer = path, 404, {"ok": False, "error": "unknown_path"}
        call = Call(method, body, headers, path, status, answer)
        self.record(call)
        return call, extra


class _Handler(BaseHTTPRequestHandler):
    standin: SlackStandIn  # set on the per-server subclass

    def do_POST(self) -> None:
        split = urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        call, extra = self.standin.reply(split.path, split.query, headers, raw)
        payload = json.dumps(call.response).encode("utf-8")
        self.send_response(call.status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        for key, value in extra.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST

    def log_message(self, format: str, *args: object) -> None:
        pass
