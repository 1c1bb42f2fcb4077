"""FakeSlack, driven by the real slack_sdk WebClient: what it records and how it answers."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry import RateLimitErrorRetryHandler
from slack_sdk.webhook import WebhookClient

from tests.slack_fixtures import drop_proxy_settings
from tests.slack_mock import FakeSlack, parse_body

BLOCKS = [
    {"type": "section", "text": {"type": "mrkdwn", "text": "*lock:orders* held 2h"}},
    {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "action_id": "lockguard_approve",
                "value": "case-1",
                "text": {"type": "plain_text", "text": "Release"},
            }
        ],
    },
]


def client_for(fake: FakeSlack, **kwargs: Any) -> WebClient:
    return WebClient(token="xoxb-test", base_url=fake.url, **kwargs)


def test_post_message_is_recorded_with_blocks_and_gets_increasing_ts(fake_slack: FakeSlack) -> None:
    client = client_for(fake_slack)
    first = client.chat_postMessage(channel="C0LOCKS", text="1 stale lock", blocks=BLOCKS)
    second = client.chat_postMessage(channel="C0LOCKS", text="again")

    assert first["ok"] is True
    assert first["channel"] == "C0LOCKS"
    assert (first["ts"], second["ts"]) == ("1700000000.000100", "1700000000.000200")
    assert first["message"]["blocks"] == BLOCKS
    [call, _] = fake_slack.wait_for("chat.postMessage", count=2)
    assert call.body == {"channel": "C0LOCKS", "text": "1 stale lock", "blocks": BLOCKS}
    assert call.token == "xoxb-test"
    assert call.headers["authorization"] == "Bearer xoxb-test"
    assert call.status == 200
    assert call.response["ts"] == first["ts"]


def test_update_is_recorded_and_changes_the_message(fake_slack: FakeSlack) -> None:
    client = client_for(fake_slack)
    posted = client.chat_postMessage(channel="C0LOCKS", text="pending", blocks=BLOCKS)
    reply = client.chat_update(
        channel="C0LOCKS", ts=posted["ts"], text="released", blocks=BLOCKS[:1]
    )

    assert (reply["ok"], reply["channel"], reply["ts"]) == (True, "C0LOCKS", posted["ts"])
    [call] = fake_slack.calls("chat.update")
    assert call.body["ts"] == posted["ts"]
    assert call.body["blocks"] == BLOCKS[:1]
    message = fake_slack.message("C0LOCKS", posted["ts"])
    assert message is not None
    assert (message["text"], message["blocks"]) == ("released", BLOCKS[:1])


def test_usergroup_members_are_configurable(fake_slack: FakeSlack) -> None:
    fake_slack.set_usergroup("S0APPROVERS", ["U0ALICE", "U0BOB"])
    client = client_for(fake_slack)

    assert client.usergroups_users_list(usergroup="S0APPROVERS")["users"] == ["U0ALICE", "U0BOB"]
    with pytest.raises(SlackApiError) as err:
        client.usergroups_users_list(usergroup="S0NOBODY")
    assert err.value.response["error"] == "no_such_subteam"
    assert [c.body["usergroup"] for c in fake_slack.calls("usergroups.users.list")] == [
        "S0APPROVERS",
        "S0NOBODY",
    ]


def test_other_canned_methods(fake_slack: FakeSlack) -> None:
    fake_slack.set_channel_members("C0LOCKS", ["U0ALICE"])
    client = client_for(fake_slack)

    auth = client.auth_test()
    assert (auth["team_id"], auth["user_id"], auth["bot_id"]) == (
        "T0LOCKGUARD",
        "U0LOCKBOT",
        "B0LOCKBOT",
    )
    assert client.conversations_members(channel="C0LOCKS")["members"] == ["U0ALICE"]
    assert client.chat_postEphemeral(channel="C0LOCKS", user="U0ALICE", text="not an approver")[
        "message_ts"
    ]
    view = {
        "type": "modal",
        "callback_id": "reject_reason",
        "blocks": [],
        "title": {"type": "plain_text", "text": "Reject"},
    }
    opened = client.views_open(trigger_id="1.2.3", view=view)
    assert opened["view"]["id"].startswith("V")
    assert opened["view"]["callback_id"] == "reject_reason"
    assert client.views_publish(user_id="U0ALICE", view={"type": "home", "blocks": []})["ok"]
    assert client.api_call("reactions.add", json={"name": "lock"})["ok"]
    assert fake_slack.summary() == (
        "auth.test x1, conversations.members x1, "
        "chat.postEphemeral x1, views.open x1, views.publish x1, "
        "reactions.add x1"
    )


def test_file_upload_v2_goes_through_the_fake(fake_slack: FakeSlack) -> None:
    client = client_for(fake_slack)
    reply = client.files_upload_v2(
        channel="C0LOCKS", content="key,age\nlock:a,3600\n", filename="locks.csv", title="locks"
    )

    assert reply["ok"] is True
    [upload] = fake_slack.calls("upload")
    assert upload.body["content"] == b"key,age\nlock:a,3600\n"
    [complete] = fake_slack.calls("files.completeUploadExternal")
    assert complete.body["files"] == [{"id": upload.target, "title": "locks"}]


def test_form_and_multipart_bodies_are_parsed_with_json_fields_decoded(
    fake_slack: FakeSlack,
) -> None:
    client = client_for(fake_slack)
    client.api_call(
        "chat.postMessage",
        params={"channel": "C0LOCKS", "text": "form", "blocks": json.dumps(BLOCKS)},
    )
    # slack_sdk sends multipart/form-data only when there are files.
    client.api_call(
        "files.upload",
        data={"channels": "C0LOCKS", "title": "t", "blocks": json.dumps(BLOCKS)},
        files={"file": b"key,age\n"},
    )

    [form] = fake_slack.calls("chat.postMessage")
    assert form.headers["content-type"] == "application/x-www-form-urlencoded"
    assert form.body == {"channel": "C0LOCKS", "text": "form", "blocks": BLOCKS}
    [multipart] = fake_slack.calls("files.upload")
    assert multipart.headers["content-type"].startswith("multipart/form-data")
    assert multipart.body == {
        "channels": "C0LOCKS",
        "title": "t",
        "blocks": BLOCKS,
        "file": b"key,age\n",
    }


def test_parse_body_merges_the_query_string() -> None:
    assert parse_body("", b"", "channel=C1&limit=5") == {"channel": "C1", "limit": "5"}
    assert parse_body("application/json", b'{"a": [1]}', "b=2") == {"a": [1], "b": "2"}


def test_a_call_without_token_is_not_authed(fake_slack: FakeSlack) -> None:
    with pytest.raises(SlackApiError) as err:
        WebClient(base_url=fake_slack.url).chat_postMessage(channel="C0LOCKS", text="hi")
    assert err.value.response["error"] == "not_authed"
    [call] = fake_slack.calls()
    assert call.token is None


def test_fail_answers_the_next_calls_with_an_error(fake_slack: FakeSlack) -> None:
    fake_slack.fail("chat.update", error="msg_too_long", times=2)
    client = client_for(fake_slack)

    for _ in range(2):
        with pytest.raises(SlackApiError) as err:
            client.chat_update(channel="C0LOCKS", ts="1700000000.000100", text="x")
        assert err.value.response["error"] == "msg_too_long"
    assert client.chat_update(channel="C0LOCKS", ts="1700000000.000100", text="x")["ok"]
    assert [c.response["ok"] for c in fake_slack.calls("chat.update")] == [False, False, True]


def test_fail_with_http_status(fake_slack: FakeSlack) -> None:
    fake_slack.fail("chat.postMessage", error="internal_error", status=500)
    with pytest.raises(SlackApiError) as err:
        client_for(fake_slack).chat_postMessage(channel="C0LOCKS", text="x")
    assert err.value.response.status_code == 500


def test_rate_limit_without_retry_handler_raises(fake_slack: FakeSlack) -> None:
    fake_slack.rate_limit("chat.postMessage", retry_after=7)
    with pytest.raises(SlackApiError) as err:
        client_for(fake_slack).chat_postMessage(channel="C0LOCKS", text="x")
    assert err.value.response.status_code == 429
    assert err.value.response.headers["retry-after"] == "7"


def test_rate_limit_is_retried_by_the_rate_limit_retry_handler(fake_slack: FakeSlack) -> None:
    # retry_after=0: the handler sleeps 0 + random(0..1) s before its one retry.
    fake_slack.rate_limit("chat.postMessage", retry_after=0)
    client = client_for(fake_slack, retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=1)])

    assert client.chat_postMessage(channel="C0LOCKS", text="x")["ok"] is True
    assert [c.status for c in fake_slack.calls("chat.postMessage")] == [429, 200]


def test_on_message_hook_sees_message_bodies_and_can_refuse(fake_slack: FakeSlack) -> None:
    seen: list[dict[str, Any]] = []

    def checker(body: dict[str, Any]) -> str | None:
        seen.append(body)
        if len(body.get("blocks", [])) > 1:
            raise ValueError("too many blocks for this test")
        return "msg_blocks_too_long" if body.get("text") == "long" else None

    fake_slack.on_message = checker
    client = client_for(fake_slack)
    assert client.chat_postMessage(channel="C0LOCKS", text="ok", blocks=BLOCKS[:1])["ok"]
    with pytest.raises(SlackApiError) as err:
        client.chat_postMessage(channel="C0LOCKS", text="two", blocks=BLOCKS)
    assert err.value.response["error"] == "invalid_blocks"
    with pytest.raises(SlackApiError) as err:
        client.chat_update(channel="C0LOCKS", ts="1.2", text="long")
    assert err.value.response["error"] == "msg_blocks_too_long"
    client.auth_test()

    assert [b["text"] for b in seen] == ["ok", "two", "long"]
    assert [str(e) for e in fake_slack.hook_errors] == ["too many blocks for this test"]


def test_response_url_posts_are_recorded(fake_slack: FakeSlack) -> None:
    url = fake_slack.response_url("cmd-1")
    WebhookClient(url).send(text="scanning...", response_type="ephemeral")

    [call] = fake_slack.wait_for("response_url")
    assert call.target == "cmd-1"
    assert call.body == {"text": "scanning...", "response_type": "ephemeral"}


def test_wait_for_times_out_naming_what_was_received(fake_slack: FakeSlack) -> None:
    client_for(fake_slack).chat_postMessage(channel="C0LOCKS", text="x")
    with pytest.raises(
        AssertionError,
        match=r"waited 0\.1s for 1 'chat\.update' call\(s\), "
        r"got 0; received: chat\.postMessage x1",
    ):
        fake_slack.wait_for("chat.update", timeout=0.1)


def test_clear_forgets_calls(fake_slack: FakeSlack) -> None:
    client_for(fake_slack).auth_test()
    fake_slack.clear()
    assert fake_slack.calls() == []
    with pytest.raises(AssertionError, match="received: nothing"):
        fake_slack.wait_for("auth.test", timeout=0)


def test_concurrent_calls_are_all_recorded_with_distinct_ts(fake_slack: FakeSlack) -> None:
    def post(n: int) -> None:
        client = client_for(fake_slack)
        for i in range(10):
            client.chat_postMessage(channel="C0LOCKS", text=f"{n}-{i}")

    threads = [threading.Thread(target=post, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    calls = fake_slack.wait_for("chat.postMessage", count=80)
    assert len(calls) == 80
    assert len({c.response["ts"] for c in calls}) == 80
    assert sorted(c.body["text"] for c in calls) == sorted(
        f"{n}-{i}" for n in range(8) for i in range(10)
    )


def test_context_manager_stops_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    drop_proxy_settings(monkeypatch)
    with FakeSlack() as fake:
        url = fake.url
        assert client_for(fake).auth_test()["ok"]
    with pytest.raises(RuntimeError, match="not started"):
        _ = fake.url
    assert url.startswith("http://127.0.0.1:")
    assert url.endswith("/api/")
