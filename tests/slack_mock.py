"""FakeSlack: the Slack Web API stand-in of `lockguard demo` (`bot.demo.standin`), with the
tests' team and bot ids and lenient answers (a test may update or click a message it never
posted, or call a method the stand-in does not know: `{"ok": true}`).

    with FakeSlack() as fake:   # or the `fake_slack` fixture (tests/slack_fixtures.py)
        WebClient(token="xoxb-test", base_url=fake.url).chat_postMessage(channel="C1", text="hi")
        assert fake.wait_for("chat.postMessage")[0].body["text"] == "hi"

What it records, its faults (`fail`, `rate_limit`), the `on_message` hook and `hook_errors`:
see bot/demo/standin.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.demo.slack_wire import JSON_FIELDS, Call, parse_body
from bot.demo.standin import MessageHook, SlackStandIn

__all__ = ["JSON_FIELDS", "Call", "FakeSlack", "MessageHook", "parse_body"]


class FakeSlack(SlackStandIn):
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
