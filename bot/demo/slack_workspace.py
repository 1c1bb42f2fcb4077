"""The Slack workspace the stand-in plays: its team and bot, the messages posted (and updated),
user groups, channel members, and the answer to each Web API method lockguard calls.

Strict (`strict=True`, the demo's) it refuses as Slack does: an update of a message it never
posted is `message_not_found`, a message with neither text nor blocks `no_text`, an ephemeral
message without a user `user_not_in_channel`, any other method `unknown_method`. Lenient (the
tests', which click messages they never posted), it takes all of these, answering `{"ok": true}`.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping
from typing import Any

MESSAGE_METHODS = frozenset({"chat.postMessage", "chat.update", "chat.postEphemeral"})
SCOPES = "chat:write,commands,usergroups:read,channels:read,files:write"
Answer = Callable[["Workspace", dict[str, Any]], dict[str, Any]]


def _error(code: str) -> dict[str, Any]:
    return {"ok": False, "error": code}


class Workspace:
    def __init__(
        self,
        *,
        team_id: str,
        team: str,
        bot_user_id: str,
        bot_id: str,
        strict: bool,
        usergroups: Mapping[str, list[str]] | None = None,
        channel_members: Mapping[str, list[str]] | None = None,
    ) -> None:
        self.team_id, self.team, self.bot_user_id, self.bot_id = team_id, team, bot_user_id, bot_id
        self.strict = strict
        #: Where uploads go (`<base>upload/<file id>`): set once the server has its port.
        self.base = ""
        self.usergroups = {k: list(v) for k, v in (usergroups or {}).items()}
        self.members = {k: list(v) for k, v in (channel_members or {}).items()}
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}
        self.lock = threading.Lock()
        self._seq = itertools.count(1)

    def answer(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        known = _ANSWERS.get(method)
        if known is not None:
            return known(self, body)
        return _error("unknown_method") if self.strict else {"ok": True}

    def message(self, channel: str, ts: str) -> dict[str, Any] | None:
        with self.lock:
            found = self.messages.get((channel, ts))
            return dict(found) if found is not None else None

    def _next_ts(self) -> str:
        micros = next(self._seq) * 100
        return f"{1_700_000_000 + micros // 1_000_000}.{micros % 1_000_000:06d}"

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

    def _post_message(self, body: dict[str, Any]) -> dict[str, Any]:
        channel = body.get("channel")
        if not channel:
            return _error("channel_not_found")
        if self.strict and not body.get("text") and not body.get("blocks"):
            return _error("no_text")
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
        with self.lock:
            self.messages[(str(channel), ts)] = message
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _update(self, body: dict[str, Any]) -> dict[str, Any]:
        channel, ts = body.get("channel"), body.get("ts")
        if not channel or not ts:
            return _error("message_not_found")
        with self.lock:
            where = (str(channel), str(ts))
            if self.strict and where not in self.messages:
                return _error("message_not_found")
            message = self.messages.setdefault(where, {"ts": ts})
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
            return _error("channel_not_found")
        if self.strict and not body.get("user"):
            return _error("user_not_in_channel")
        return {"ok": True, "message_ts": self._next_ts()}

    def _view(self, body: dict[str, Any]) -> dict[str, Any]:
        view = body.get("view")
        if self.strict and not isinstance(view, dict):
            return _error("invalid_arguments")
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
        with self.lock:
            users = self.usergroups.get(str(body.get("usergroup", "")))
        return _error("no_such_subteam") if users is None else {"ok": True, "users": list(users)}

    def _conversation_members(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            members = self.members.get(str(body.get("channel", "")))
        if members is None:
            return _error("channel_not_found")
        return {"ok": True, "members": list(members), "response_metadata": {"next_cursor": ""}}

    def _upload_url(self, body: dict[str, Any]) -> dict[str, Any]:
        file_id = f"F{next(self._seq):08d}"
        return {"ok": True, "upload_url": f"{self.base}upload/{file_id}", "file_id": file_id}

    def _complete_upload(self, body: dict[str, Any]) -> dict[str, Any]:
        given = body.get("files")
        listed = [f for f in given if isinstance(f, dict)] if isinstance(given, list) else []
        files = [{"id": f.get("id"), "title": f.get("title", "")} for f in listed if f]
        return {"ok": True, "files": files}


_ANSWERS: dict[str, Answer] = {
    "auth.test": Workspace._auth_test,
    "chat.postMessage": Workspace._post_message,
    "chat.update": Workspace._update,
    "chat.postEphemeral": Workspace._post_ephemeral,
    "views.open": Workspace._view,
    "views.publish": Workspace._view,
    "views.update": Workspace._view,
    "views.push": Workspace._view,
    "usergroups.users.list": Workspace._usergroup_users,
    "conversations.members": Workspace._conversation_members,
    "files.getUploadURLExternal": Workspace._upload_url,
    "files.completeUploadExternal": Workspace._complete_upload,
}
