"""FakeSlack: a local mock of Slack's Web API for the tests (127.0.0.1, port 0, daemon threads).

    with FakeSlack() as fake:   # or the `fake_slack` fixture (tests/slack_fixtures.py)
        WebClient(token="xoxb-test", base_url=fake.url).chat_postMessage(channel="C1", text="hi")
        assert fake.wait_for("chat.postMessage")[0].body["text"] == "hi"

Every request is recorded, in arrival order and thread-safely, as a `Call`: the method name
("chat.postMessage"; "response_url" for `POST /response_url/<id>`, which is where Bolt's
`respond()` goes when a test sets `response_url=fake.response_url(id)`; "upload" for the file
upload URL), the body parsed into a dict (JSON, form-urlencoded or multipart; JSON-in-form fields
such as `blocks` decoded; query-string parameters merged in), the headers, and what the fake
answered. Web API calls without a token (`Authorization: Bearer ...` or a `token` field) get
`{"ok": false, "error": "not_authed"}`.

Faults: `fail(method, error=..., status=..., times=...)` and `rate_limit(method, retry_after=...)`
(HTTP 429 + Retry-After) answer the next `times` calls of `method` (None: every call).
`on_message(body)`, when set, sees the body of every chat.postMessage / chat.update /
chat.postEphemeral: raising makes the fake answer `invalid_blocks` (the exception is kept in
`hook_errors`); returning a non-empty str makes it answer that error code.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

MessageHook = Callable[[dict[str, Any]], object]

# Fields Slack takes as JSON even inside a form-encoded or multipart body.
JSON_FIELDS = frozenset(
    {
        "blocks",
        "attachments",
        "view",
        "metadata",
        "files",
        "options",
        "option_groups",
        "user_auth_blocks",
        "unfurls",
        "dialog",
    }
)
MESSAGE_METHODS = frozenset({"chat.postMessage", "chat.update", "chat.postEphemeral"})


@dataclass(frozen=True)
class Call:
    method: str
    body: dict[str, Any]
    headers: dict[str, str]  # lower-case names
    path: str
    status: int = 200
    response: dict[str, Any] = field(default_factory=dict)

    @property
    def token(self) -> str | None:
        auth = self.headers.get("authorization", "")
        if auth.lower().startswith("bearer ") and auth[7:].strip():
            return auth[7:].strip()
        token = self.body.get("token")
        return token if isinstance(token, str) and token else None

    @property
    def target(self) -> str:
        """The `<id>` of `/response_url/<id>` and `/upload/<id>`; "" for Web API calls."""
        parts = self.path.strip("/").split("/", 1)
        return parts[1] if len(parts) == 2 and parts[0] in ("response_url", "upload") else ""


@dataclass
class _Fault:
    status: int
    body: dict[str, Any]
    headers: dict[str, str]
    remaining: int | None


def _decode_json_fields(values: dict[str, Any]) -> dict[str, Any]:
    for name in JSON_FIELDS & values.keys():
        value = values[name]
        if isinstance(value, str) and value[:1] in ("[", "{"):
            with contextlib.suppress(ValueError):
                values[name] = json.loads(value)
    return values


def parse_body(content_type: str, raw: bytes, query: str = "") -> dict[str, Any]:
    """A request body (and query string) as one dict: single values as str, repeats as lists."""
    out = _form(query)
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/json" or (not kind and raw.lstrip()[:1] == b"{"):
        parsed = json.loads(raw.decode("utf-8")) if raw.strip() else {}
        out.update(parsed if isinstance(parsed, dict) else {"_json": parsed})
        return out
    if kind == "multipart/form-data":
        message = BytesParser(policy=HTTP).parsebytes(
            b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw
        )
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            if isinstance(name, str) and isinstance(payload, bytes):
                is_file = part.get_filename() is not None
                out[name] = payload if is_file else payload.decode("utf-8")
        return _decode_json_fields(out)
    out.update(_form(raw.decode("utf-8")))
    return _decode_json_fields(out)


def _form(encoded: str) -> dict[str, Any]:
    parsed = parse_qs(encoded, keep_blank_values=True)
    return {name: values[0] if len(values) == 1 else values for name, values in parsed.items()}


class FakeSlack:
    def __init__(
        self,
        *,
        on_message: MessageHook | None = None,
        usergroups: Mapping[str, list[str]] | None = None,
        channel_members: Mapping[str, list[str]] | None = None,
        team_id: str = "T0LOCKGUARD",
        bot_user_id: str = "U0LOCKBOT",
        bot_id: str = "B0LOCKBOT",
    ) -> None:
        self.on_message = on_message
        self.team_id, self.bot_user_id, self.bot_id = team_id, bot_user_id, bot_id
        self.hook_errors: list[BaseException] = []
        self._usergroups = {k: list(v) for k, v in (usergroups or {}).items()}
        self._members = {k: list(v) for k, v in (channel_members or {}).items()}
        self._calls: list[Call] = []
        self._faults: dict[str, deque[_Fault]] = {}
        self._messages: dict[tuple[str, str], dict[str, Any]] = {}
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FakeSlack:
        if self._server is None:
            handler = type("_BoundHandler", (_Handler,), {"fake": self})
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            self._server.daemon_threads = True
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.02},
                name="fake-slack",
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

    def __enter__(self) -> FakeSlack:
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
            raise RuntimeError("FakeSlack is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}/"

    @property
    def url(self) -> str:
        """The Web API base URL (ends in "/"): `WebClient(base_url=fake.url)`, SLACK_API_URL."""
        return self.base + "api/"

    def response_url(self, response_id: str = "1") -> str:
        return f"{self.base}response_url/{response_id}"

    def set_usergroup(self, group_id: str, users: list[str]) -> None:
        with self._lock:
            self._usergroups[group_id] = list(users)

    def set_channel_members(self, channel_id: str, users: list[str]) -> None:
        with self._lock:
            self._members[channel_id] = list(users)

    def fail(
        self, method: str, error: str = "msg_too_long", status: int = 200, times: int | None = 1
    ) -> None:
        self._add_fault(method, _Fault(status, {"ok": False, "error": error}, {}, times))

    def rate_limit(self, method: str, retry_after: int = 1, times: int | None = 1) -> None:
        self._add_fault(
            method,
            _Fault(
                429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(retry_after)}, times
            ),
        )

    def _add_fault(self, method: str, fault: _Fault) -> None:
        with self._lock:
            self._faults.setdefault(method, deque()).append(fault)

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def calls(self, method: str | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self._calls if method is None or c.method == method]

    def wait_for(self, method: str, count: int = 1, timeout: float = 5.0) -> list[Call]:
        """The calls of `method` once there are at least `count`; AssertionError after `timeout`
        seconds, naming everything that was received."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.calls(method)
            if len(got) >= count:
                return got
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"FakeSlack: waited {timeout:g}s for {count} {method!r} call(s), got "
                    f"{len(got)}; received: {self.summary() or 'nothing'}"
                )
            time.sleep(0.02)

    def summary(self) -> str:
        """ "auth.test x1, chat.postMessage x2" in order of first arrival."""
        counts = Counter(c.method for c in self.calls())
        return ", ".join(f"{method} x{n}" for method, n in counts.items())

    def message(self, channel: str, ts: str) -> dict[str, Any] | None:
        """The current state of a message posted (and maybe updated) through the fake."""
        with self._lock:
            found = self._messages.get((channel, ts))
            return dict(found) if found is not None else None

    def clear(self) -> None:
        """Forget recorded calls and hook errors (faults, groups and messages stay)."""
        with self._lock:
            self._calls.clear()
            self.hook_errors.clear()

    def _record(self, call: Call) -> None:
        with self._lock:
            self._calls.append(call)

    def _next_ts(self) -> str:
        micros = next(self._seq) * 100
        return f"{1_700_000_000 + micros // 1_000_000}.{micros % 1_000_000:06d}"

    def _take_fault(self, method: str) -> _Fault | None:
        with self._lock:
            queue = self._faults.get(method)
            if not queue:
                return None
            fault = queue[0]
            if fault.remaining is not None:
                fault.remaining -= 1
                if fault.remaining <= 0:
                    queue.popleft()
            return fault

    def answer(
        self, method: str, body: dict[str, Any], token: str | None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        if not token:
            return 200, {"ok": False, "error": "not_authed"}, {}
        fault = self._take_fault(method)
        if fault is not None:
            return fault.status, dict(fault.body), dict(fault.headers)
        if method in MESSAGE_METHODS and self.on_message is not None:
            try:
                verdict = self.on_message(body)
            except Exception as exc:
                self.hook_errors.append(exc)  # list.append is atomic
                return 200, {"ok": False, "error": "invalid_blocks", "errors": [str(exc)]}, {}
            if isinstance(verdict, str) and verdict:
                return 200, {"ok": False, "error": verdict}, {}
        canned = _CANNED.get(method)
        reply = canned(self, body) if canned is not None else {"ok": True}
        headers = (
            {"X-OAuth-Scopes": "chat:write,commands,usergroups:read,channels:read"}
            if method == "auth.test"
            else {}
        )
        return 200, reply, headers

    def _auth_test(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://lockguard-test.slack.com/",
            "team": "lockguard-test",
            "user": "lockguard",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _post_message(self, body: dict[str, Any]) -> dict[str, Any]:
        channel = body.get("channel")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        ts = self._next_ts()
        message = {
            "type": "message",
            "text": body.get("text", ""),
            "blocks": body.get("blocks", []),
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "team": self.team_id,
            "ts": ts,
            **({"thread_ts": body["thread_ts"]} if body.get("thread_ts") else {}),
        }
        with self._lock:
            self._messages[(str(channel), ts)] = message
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _update(self, body: dict[str, Any]) -> dict[str, Any]:
        channel, ts = body.get("channel"), body.get("ts")
        if not channel or not ts:
            return {"ok": False, "error": "message_not_found"}
        with self._lock:
            message = self._messages.setdefault((str(channel), str(ts)), {"ts": ts})
            message.update({k: body[k] for k in ("text", "blocks") if k in body})
            echo = dict(message)
        return {
            "ok": True,
            "channel": channel,
            "ts": ts,
            "text": echo.get("text", ""),
            "message": echo,
        }

    def _post_ephemeral(self, body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("channel"):
            return {"ok": False, "error": "channel_not_found"}
        return {"ok": True, "message_ts": self._next_ts()}

    def _view(self, body: dict[str, Any]) -> dict[str, Any]:
        view = body.get("view")
        view = dict(view) if isinstance(view, dict) else {}
        n = next(self._seq)
        view.update(
            {
                "id": body.get("view_id") or f"V{n:08d}",
                "team_id": self.team_id,
                "state": {"values": {}},
                "hash": f"{n}.hash",
                "app_id": "A0LOCKGUARD",
                "bot_id": self.bot_id,
            }
        )
        return {"ok": True, "view": view}

    def _usergroup_users(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            users = self._usergroups.get(str(body.get("usergroup", "")))
        if users is None:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": list(users)}

    def _conversation_members(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            members = self._members.get(str(body.get("channel", "")))
        if members is None:
            return {"ok": False, "error": "channel_not_found"}
        return {"ok": True, "members": list(members), "response_metadata": {"next_cursor": ""}}

    def _upload_url(self, body: dict[str, Any]) -> dict[str, Any]:
        file_id = f"F{next(self._seq):08d}"
        return {"ok": True, "upload_url": f"{self.base}upload/{file_id}", "file_id": file_id}

    def _complete_upload(self, body: dict[str, Any]) -> dict[str, Any]:
        listed = body["files"] if isinstance(body.get("files"), list) else []
        return {
            "ok": True,
            "files": [
                {"id": f.get("id"), "title": f.get("title", "")}
                for f in listed
                if isinstance(f, dict)
            ],
        }


_CANNED: dict[str, Callable[[FakeSlack, dict[str, Any]], dict[str, Any]]] = {
    "auth.test": FakeSlack._auth_test,
    "chat.postMessage": FakeSlack._post_message,
    "chat.update": FakeSlack._update,
    "chat.postEphemeral": FakeSlack._post_ephemeral,
    "views.open": FakeSlack._view,
    "views.publish": FakeSlack._view,
    "views.update": FakeSlack._view,
    "views.push": FakeSlack._view,
    "usergroups.users.list": FakeSlack._usergroup_users,
    "conversations.members": FakeSlack._conversation_members,
    "files.getUploadURLExternal": FakeSlack._upload_url,
    "files.completeUploadExternal": FakeSlack._complete_upload,
}


class _Handler(BaseHTTPRequestHandler):
    fake: FakeSlack  # set on the per-server subclass

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        split = urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        kind, _, name = split.path.lstrip("/").partition("/")
        body: dict[str, Any]
        if kind == "upload":
            body, method = {"content": raw}, "upload"
            status, reply, extra = 200, {"ok": True}, {}
        else:
            try:
                body = parse_body(headers.get("content-type", ""), raw, split.query)
            except ValueError as exc:  # includes JSON and UTF-8 errors
                body = {"_unparsed": raw, "_error": str(exc)}
            if kind == "response_url":
                method, status, reply, extra = "response_url", 200, {"ok": True}, {}
            elif kind == "api" and name:
                method = name
                token = Call(method, body, headers, split.path).token
                status, reply, extra = self.fake.answer(method, body, token)
            else:
                method, status, extra = split.path, 404, {}
                reply = {"ok": False, "error": "unknown_path"}
        self.fake._record(Call(method, body, headers, split.path, status, reply))
        payload = json.dumps(reply).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        for key, value in extra.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass
