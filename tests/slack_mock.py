"""FakeSlack: the Slack Web API stand-in of `lockguard demo` (`bot.demo.standin`), with the
tests' team and bot ids and lenient answers (a test may update or click a message it never
posted, or call a method the stand-in does not know: `{"ok": true}`).

    with FakeSlack() as fake:   # or the `fake_slack` fixture (tests/slack_fixtures.py)
        WebClient(token="xoxb-test", base_url=fake.url).chat_postMessage(channel="C1", text="hi")
        assert fake.wait_for("chat.postMessage")[0].body["text"] == "hi"

What it records, the `on_message` hook and `hook_errors`: see bot/demo/standin.py. The tests'
own: faults, `fail(method, error=..., status=..., times=...)` and `rate_limit(method,
retry_after=...)` (HTTP 429 + Retry-After) answer the next `times` calls of `method` (None: every
call) before anything else; `set_usergroup` and `set_channel_members` change the workspace.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.demo.slack_wire import JSON_FIELDS, Call, parse_body
from bot.demo.standin import MessageHook, Reply, SlackStandIn

__all__ = ["JSON_FIELDS", "Call", "FakeSlack", "MessageHook", "parse_body"]


@dataclass
class _Fault:
    status: int
    body: dict[str, Any]
    headers: dict[str, str]
    remaining: int | None


class Faults:
    """Errors to answer instead of the real answer: the next `times` calls of a method (None:
    every call) get them, in the order they were added."""

    def __init__(self) -> None:
        self._faults: dict[str, deque[_Fault]] = {}
        self._fault_lock = threading.Lock()

    def fail(
        self, method: str, error: str = "msg_too_long", status: int = 200, times: int | None = 1
    ) -> None:
        self._add_fault(method, _Fault(status, {"ok": False, "error": error}, {}, times))

    def rate_limit(self, method: str, retry_after: int = 1, times: int | None = 1) -> None:
        body = {"ok": False, "error": "ratelimited"}
        self._add_fault(method, _Fault(429, body, {"Retry-After": str(retry_after)}, times))

    def _add_fault(self, method: str, fault: _Fault) -> None:
        with self._fault_lock:
            self._faults.setdefault(method, deque()).append(fault)

    def clear_faults(self) -> None:
        with self._fault_lock:
            self._faults.clear()

    def _take_fault(self, method: str) -> _Fault | None:
        with self._fault_lock:
            queue = self._faults.get(method)
            if not queue:
                return None
            fault = queue[0]
            if fault.remaining is not None:
                fault.remaining -= 1
                if fault.remaining <= 0:
                    queue.popleft()
            return fault


class FakeSlack(SlackStandIn, Faults):
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
        super().__init__(
            team_id=team_id,
            team="lockguard-test",
            bot_user_id=bot_user_id,
            bot_id=bot_id,
            usergroups=usergroups,
            channel_members=channel_members,
            on_message=on_message,
            strict=False,
        )
        Faults.__init__(self)

    def answer(self, method: str, body: dict[str, Any], token: str | None) -> Reply:
        fault = self._take_fault(method) if token else None
        if fault is not None:
            return fault.status, dict(fault.body), dict(fault.headers)
        return super().answer(method, body, token)

    def set_usergroup(self, group_id: str, users: list[str]) -> None:
        with self.workspace.lock:
            self.workspace.usergroups[group_id] = list(users)

    def set_channel_members(self, channel_id: str, users: list[str]) -> None:
        with self.workspace.lock:
            self.workspace.members[channel_id] = list(users)
