"""What the Slack stand-in hears: one recorded request (`Call`), request bodies parsed as Slack
parses them (`parse_body`), and the ordered, thread-safe log of calls a caller waits on
(`CallLog`)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import parse_qs

#: Fields Slack takes as JSON even inside a form-encoded or multipart body.
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


class WaitTimeout(AssertionError, TimeoutError):
    """What `CallLog.wait_for` raises: a TimeoutError for the demo, a failed assertion in a test."""


@dataclass(frozen=True)
class Call:
    """One request: the method ("chat.postMessage"; "response_url" for `POST /response_url/<id>`;
    "upload" for the file upload URL), its parsed body, its headers and what was answered."""

    method: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    path: str = ""
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


def _decode_json_fields(values: dict[str, Any]) -> dict[str, Any]:
    for name in JSON_FIELDS:
        value = values.get(name)
        if isinstance(value, str) and value[:1] in ("[", "{"):
            with contextlib.suppress(ValueError):
                values[name] = json.loads(value)
    return values


def _form(encoded: str) -> dict[str, Any]:
    parsed = parse_qs(encoded, keep_blank_values=True)
    return {name: values[0] if len(values) == 1 else values for name, values in parsed.items()}


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


class CallLog:
    """Every call in arrival order (thread-safe), and the errors a message hook raised."""

    def __init__(self) -> None:
        self.hook_errors: list[BaseException] = []
        self._calls: list[Call] = []
        self._log_lock = threading.Lock()

    def record(self, call: Call) -> None:
        with self._log_lock:
            self._calls.append(call)

    def calls(self, method: str | None = None) -> list[Call]:
        with self._log_lock:
            return [c for c in self._calls if method is None or c.method == method]

    def wait_for(
        self,
        method: str,
        count: int = 1,
        timeout: float = 5.0,
        where: Callable[[Call], bool] | None = None,
    ) -> list[Call]:
        """The calls of `method` (that `where` accepts) once there are at least `count`;
        `WaitTimeout` after `timeout` seconds, naming everything that was received."""
        deadline = time.monotonic() + timeout
        while True:
            got = [c for c in self.calls(method) if where is None or where(c)]
            if len(got) >= count:
                return got
            if time.monotonic() >= deadline:
                raise WaitTimeout(
                    f"the Slack stand-in waited {timeout:g}s for {count} {method!r} call(s), "
                    f"got {len(got)}; received: {self.summary() or 'nothing'}"
                )
            time.sleep(0.02)

    def summary(self) -> str:
        """ "auth.test x1, chat.postMessage x2" in order of first arrival."""
        counts = Counter(c.method for c in self.calls())
        return ", ".join(f"{method} x{n}" for method, n in counts.items())

    def clear(self) -> None:
        with self._log_lock:
            self._calls.clear()
            self.hook_errors.clear()
