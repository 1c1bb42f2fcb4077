"""`lockguard demo`'s Slack part: the real app on the stand-in Web API, driven by signed requests,
and both messages (before and after the click) printed readable. Runs on fakeredis, as on a
machine with no redis-server."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator

import fakeredis
import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier

from bot import cli
from bot.cases.reclaim_config import ReclaimConfig
from bot.core.rules import Policy
from bot.demo import slack_walkthrough, walkthrough
from bot.demo.standin import SlackStandIn
from bot.engine import Engine
from bot.scan.result import ScanOptions
from tests.slack_fixtures import drop_proxy_settings

DEAD_PROXY = "http://127.0.0.1:9"


def run_demo(monkeypatch: pytest.MonkeyPatch, *, assume_yes: bool) -> str:
    # no redis-server: fakeredis, as docs/index.md says
    monkeypatch.setattr(walkthrough.shutil, "which", lambda name: None)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    for name in ("HTTPS_PROXY", "HTTP_PROXY"):  # a proxy the demo must not send loopback to
        monkeypatch.setenv(name, DEAD_PROXY)
    out = io.StringIO()
    assert walkthrough.run_demo(out, assume_yes=assume_yes, wait_seconds=3.5) == 0
    assert os.environ["HTTPS_PROXY"] == DEAD_PROXY  # put back after the app was made
    return out.getvalue()


@pytest.fixture(scope="module")
def approved() -> Iterator[str]:
    with pytest.MonkeyPatch.context() as mp:
        yield run_demo(mp, assume_yes=True)


def framed(text: str, start: str, end: str) -> list[str]:
    """The lines of the message shown between the `start` and `end` markers."""
    part = text[text.index(start) : text.index(end, text.index(start))]
    return [line[len("   | ") :] for line in part.splitlines() if line.startswith("   | ")]


def test_the_findings_message_is_printed_with_its_buttons(approved: str) -> None:
    before = framed(approved, "(chat.postMessage", "the case in Redis")
    assert before, approved
    assert "locks flagged on embedded" in before[0]
    assert set(before[1]) == {"="}
    assert "[ Approve ]  [ Reject ]" in before
    body = "\n".join(before)
    for key in (
        "lock:invoice-export",
        "job-lock:default:cleanupJob",
        "redisson:orders:settle",
        "lock:nightly-report",
        "lock:live-worker",
        r"\x17\x00\x00\x00\x00\x00\x0009",
    ):
        assert key in body, key
    assert "kept alive by contenders" in body
    assert "no expiry: nobody will ever release it" in body
    assert "no expiry: no expiry" not in body  # the reason's label is not said twice


def test_the_updated_message_says_released_after_the_click(approved: str) -> None:
    assert "clicks [ Approve ] (--yes)" in approved
    after = framed(approved, "(chat.update)", "5. release")
    assert after, approved
    assert after[0].startswith("Case LG-")
    assert after[0].endswith(": Released")
    body = "\n".join(after)
    assert "Approved by @demo-operator" in body
    assert "3 of 3 locks released" in body
    assert "[ Approve ]" not in body  # a decided case has no buttons
    assert approved.index("(chat.postMessage") < approved.index("(chat.update)")


def test_both_messages_are_plain_text_with_slack_markup_undone(approved: str) -> None:
    shown = framed(approved, "(chat.postMessage", "the case in Redis") + framed(
        approved, "(chat.update)", "5. release"
    )
    text = "\n".join(shown)
    for markup in ("<!date^", "<@U", "&lt;", "&gt;", "&amp;", "`", "*Outcomes"):
        assert markup not in text, markup
    assert " UTC" in text  # dates: the fallback Slack shows where the token is not understood


def test_the_demo_releases_3_locks_with_3_events_and_spares_the_live_and_not_due_ones(
    approved: str,
) -> None:
    assert "embedded Redis: fakeredis" in approved
    assert "lockguard serve: HTTP mode (POST /slack/events) on 127.0.0.1:" in approved
    assert "answered: Scanning the configured patterns…" in approved
    assert "3 of 3 lock(s) released" in approved
    assert "received by a subscriber on 'locks:reclaimed': 3" in approved
    assert "redisson:orders:settle: still there" in approved
    assert "still held by its owner" in approved
    assert "kept_alive_by_contenders" in approved  # the CLI scans' tables
    assert "long_held_renewing" in approved
    assert "cleaned up" in approved


def test_declined_at_the_prompt_the_demo_rejects_through_the_modal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = run_demo(monkeypatch, assume_yes=False)
    assert "clicks [ Reject ]" in text
    assert "(views.open)" in text
    after = framed(text, "(chat.update)", "5. release")
    assert after[0].endswith(": Rejected")
    assert "“declined at the demo prompt”" in "\n".join(after)
    assert "rejected, no lock was touched" in text
    assert "received by a subscriber on 'locks:reclaimed': 0" in text
    # no success title over a demo that released nothing; the result says what happened
    assert "released safely" not in text
    assert text.splitlines()[0].endswith("released only once a person approves")
    assert "result: @demo-operator rejected the case; no lock was released" in text


def test_the_approver_is_shown_by_name_and_audit_lines_are_whole(approved: str) -> None:
    assert "result: 3 abandoned lock(s) released after @demo-operator approved them" in approved
    release = approved[approved.index("5. release") : approved.index("6. reclaim")]
    assert "approved by @demo-operator: 3 of 3 lock(s) released" in release
    trail = approved[approved.index("8. audit trail") : approved.index("result:")]
    lines = [ln for ln in trail.splitlines()[1:] if ln.strip()]
    # all of it (under the 12 shown): the scans, the case, the decision, one entry per release
    # (each saying it was verified), the case closed
    assert len(lines) == 9, lines
    assert sum(" release " in ln for ln in lines) == 3
    assert all("U0DEMOOPERATOR" not in ln for ln in lines)
    decision = 'by @demo-operator  decision: "approved"'
    assert any("decision      LG-" in ln and decision in ln for ln in lines)
    assert any('outcomes: {released=3}; state: "released"' in ln for ln in lines)
    for line in lines:  # every field whole: no JSON object cut off at a width
        assert not line.endswith("…"), line
        assert "{" not in line or line.count("{") == line.count("}"), line
    # the one place the Slack user id is named: the note that Redis and the events record it
    assert approved.count("is U0DEMOOPERATOR in Redis and in the reclaim events") == 1


# -- the pieces -----------------------------------------------------------------------------------


@pytest.fixture
def engine() -> Engine:
    options = ScanOptions(patterns=[b"lock:*"], policy=Policy(stale_threshold_ms=3_000))
    return Engine(
        fakeredis.FakeRedis(),
        options,
        ReclaimConfig(dry_run=False, policy=options.policy),
        endpoint="embedded",
    )


def test_requests_are_signed_as_slack_signs_them() -> None:
    secret, body = "s3cret", "command=%2Flockguard&text=scan"
    sig = slack_walkthrough.signature(secret, 1_700_000_000, body)
    verifier = SignatureVerifier(secret, clock=type("C", (), {"now": lambda self: 1.7e9})())
    assert verifier.is_valid(body, "1700000000", sig)
    assert not verifier.is_valid(body + "x", "1700000000", sig)


def test_the_app_refuses_a_request_signed_with_another_secret(
    monkeypatch: pytest.MonkeyPatch, engine: Engine
) -> None:
    drop_proxy_settings(monkeypatch)
    with slack_walkthrough.SlackDemo(engine) as slack:
        good = slack.slash("help")
        bad = slack_walkthrough.post_signed(
            slack.events_url, "not-the-secret", "command=%2Flockguard"
        )
        calls = [c.method for c in slack.standin.calls()]
    assert good.status == 200
    assert "lockguard commands" in slack_walkthrough.answered(good)
    assert bad.status == 401
    assert calls == ["auth.test"]  # Bolt checks the token once at start; help is the ack


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlackStandIn]:
    drop_proxy_settings(monkeypatch)
    with SlackStandIn(usergroups={"S0OPS": ["U0ALICE"]}) as s:
        yield s


def test_the_standin_answers_the_methods_the_app_calls(standin: SlackStandIn) -> None:
    client = WebClient(token="xoxb-demo", base_url=standin.url)
    assert client.auth_test()["team_id"] == "T0DEMO"
    posted = client.chat_postMessage(
        channel="C1",
        text="hi",
        blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}],
    )
    ts = str(posted["ts"])
    client.chat_update(channel="C1", ts=ts, text="bye", blocks=[])
    assert (standin.message("C1", ts) or {})["text"] == "bye"
    assert client.chat_postEphemeral(channel="C1", user="U1", text="psst")["message_ts"]
    view = {
        "type": "modal",
        "callback_id": "cb",
        "title": {"type": "plain_text", "text": "t"},
        "blocks": [],
    }
    assert str(client.views_open(trigger_id="1.2", view=view)["view"]["id"]).startswith("V")
    assert client.views_publish(user_id="U1", view={**view, "type": "home"})["ok"]
    assert client.usergroups_users_list(usergroup="S0OPS")["users"] == ["U0ALICE"]
    assert [c.method for c in standin.calls()] == [
        "auth.test",
        "chat.postMessage",
        "chat.update",
        "chat.postEphemeral",
        "views.open",
        "views.publish",
        "usergroups.users.list",
    ]
    assert standin.calls("chat.postMessage")[0].body["blocks"][0]["type"] == "section"


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda c: c.chat_update(channel="C1", ts="1.000001", text="x"), "message_not_found"),
        (lambda c: c.api_call("chat.postMessage", json={"channel": "C1"}), "no_text"),
        (lambda c: c.api_call("chat.delete", json={"channel": "C1"}), "unknown_method"),
        (lambda c: c.usergroups_users_list(usergroup="S0NONE"), "no_such_subteam"),
    ],
)
def test_the_standin_refuses_like_slack(standin: SlackStandIn, call: object, error: str) -> None:
    client = WebClient(token="xoxb-demo", base_url=standin.url)
    with pytest.raises(SlackApiError) as raised:
        call(client)  # type: ignore[operator]
    assert raised.value.response["error"] == error


def test_the_standin_wants_a_token(standin: SlackStandIn) -> None:
    with pytest.raises(SlackApiError) as raised:
        WebClient(base_url=standin.url).api_call("auth.test")
    assert raised.value.response["error"] == "not_authed"
    with pytest.raises(TimeoutError, match=r"received: auth\.test"):
        standin.wait_for("chat.postMessage", timeout=0.1)


def test_without_redis_server_nor_fakeredis_the_demo_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(walkthrough.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "fakeredis", None)  # `import fakeredis` fails
    assert cli.main(["demo", "--yes"]) == 2
    captured = capsys.readouterr()
    assert "no redis-server installed" in captured.err
    assert "pip install 'lockguard[demo]'" in captured.err
    assert "Traceback" not in captured.err
    assert "embedded Redis:" not in captured.out


def test_the_demo_shows_the_home_tab_and_a_digest(approved: str) -> None:
    """What an on-call sees in Slack besides the findings: the app's Home tab (published for
    the operator who opens it) and the digest the schedule posts."""
    home = approved[approved.index("opens the app's Home tab") : approved.index("the digest")]
    assert "(app_home_opened): HTTP 200" in home
    assert "| lockguard on embedded" in home
    assert "Open cases:" in home
    digest = approved[approved.index("the digest LOCKGUARD_DIGEST_SCHEDULE posts") :]
    assert "| lockguard digest: embedded" in digest
    assert "lockguard's own health" in digest
    assert approved.index("the digest") < approved.index("5. release")
