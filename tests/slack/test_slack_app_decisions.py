"""Approve and Reject through Slack's protocol: who may decide, what a decision changes in Redis,
and how the case's message is rewritten (`chat.update`, from the case in Redis).
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from bot.slack.blocks import ids
from bot.store.keyspace import case_key, slack_message_key
from tests.block_kit import check_view
from tests.slack_app_harness import ALERTS, Events, Factory, SlackAppHarness, blocks_text, buttons
from tests.slack_app_harness import slack_app as slack_app  # the fixture
from tests.slack_mock import Call

LIVE = {"LOCKGUARD_DRY_RUN": "false"}


def approve(
    app: SlackAppHarness, case_id: str, post: Call, user: str = "U0ALICE", **kw: str
) -> None:
    reply = app.click(ids.APPROVE, case_id, user_id=user, message_ts=app.posted_ts(post), **kw)
    assert reply.status == 200


def updates(app: SlackAppHarness, n: int = 1) -> list[Call]:
    return app.fake.wait_for("chat.update", n)


def released_update(app: SlackAppHarness, timeout: float = 5.0) -> Call:
    """The first chat.update saying "Released" (an earlier one may say "Releasing…")."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for call in app.fake.calls("chat.update"):
            if call.body["text"].split(": ", 1)[-1].startswith("Released"):
                return call
        time.sleep(0.02)
    raise AssertionError(f"no 'Released' update; got {app.fake.summary()}")


def ephemeral(app: SlackAppHarness, n: int = 1) -> list[Call]:
    return app.fake.wait_for("chat.postEphemeral", n)


def test_an_approver_releases_the_lock_and_the_message_says_released(slack_app: Factory) -> None:
    app = slack_app(**LIVE, LOCKGUARD_APPROVERS="U0ALICE")
    app.plant(b"lock:stuck")
    events = Events(app.r)
    case_id, post = app.scan()
    assert "Approvers: <@U0ALICE>" in blocks_text(post)
    approve(app, case_id, post)
    update = updates(app)[0]
    assert (update.body["channel"], update.body["ts"]) == (ALERTS, app.posted_ts(post))
    assert "Released" in update.body["text"]
    assert buttons(update) == {}
    shown = blocks_text(update)
    assert "Approved by <@U0ALICE>" in shown
    assert "Verified" in shown
    assert "Release events published for 1" in shown
    assert app.r.exists(b"lock:stuck") == 0
    [event] = events.rest()  # published before the update that says Released
    assert (event["key"], event["case_id"], event["approved_by"]) == (
        "lock:stuck",
        case_id,
        "U0ALICE",
    )
    assert app.fake.calls("chat.postEphemeral") == []


def test_a_non_approver_is_refused_ephemerally_and_nothing_changes(slack_app: Factory) -> None:
    app = slack_app(**LIVE, LOCKGUARD_APPROVERS="U0ALICE")
    token = app.plant(b"lock:stuck")
    case_id, post = app.scan()
    approve(app, case_id, post, user="U0MALLORY")
    [told] = ephemeral(app)
    assert (told.body["channel"], told.body["user"]) == (ALERTS, "U0MALLORY")
    assert "not an approver" in told.body["text"]
    assert app.r.get(b"lock:stuck") == token
    assert app.fake.calls("chat.update") == []
    approve(app, case_id, post)  # the case is still pending: an approver can still decide
    assert "Released" in updates(app)[0].body["text"]


def test_a_member_of_the_approver_group_may_approve(slack_app: Factory) -> None:
    app = slack_app(**LIVE, LOCKGUARD_APPROVER_GROUP="S0ONCALL", LOCKGUARD_SCANNERS="U0ALICE")
    app.fake.set_usergroup("S0ONCALL", ["U0BOB"])
    app.plant()
    case_id, post = app.scan()
    approve(app, case_id, post, user="U0CAROL")
    assert "not an approver" in ephemeral(app)[0].body["text"]
    approve(app, case_id, post, user="U0BOB")
    assert "Released" in updates(app)[0].body["text"]
    assert app.fake.calls("usergroups.users.list")[0].body["usergroup"] == "S0ONCALL"
    assert len(app.fake.calls("usergroups.users.list")) == 1  # cached


def test_when_the_group_cannot_be_read_the_click_is_refused(slack_app: Factory) -> None:
    app = slack_app(**LIVE, LOCKGUARD_APPROVER_GROUP="S0ONCALL", LOCKGUARD_SCANNERS="U0ALICE")
    app.fake.set_usergroup("S0ONCALL", ["U0BOB"])
    app.fake.fail("usergroups.users.list", "missing_scope")
    token = app.plant()
    case_id, post = app.scan()
    approve(app, case_id, post, user="U0BOB")
    text = ephemeral(app)[0].body["text"]
    assert "missing_scope" in text
    assert "refuses" in text
    assert app.r.get(b"lock:stuck") == token


def test_a_clicker_from_another_team_is_refused(slack_app: Factory) -> None:
    app = slack_app(**LIVE, LOCKGUARD_APPROVERS="U0ALICE")
    token = app.plant()
    case_id, post = app.scan()
    approve(app, case_id, post, team_id="T0OUTSIDER")
    assert "another team" in ephemeral(app)[0].body["text"]
    assert app.r.get(b"lock:stuck") == token
    assert app.fake.calls("chat.update") == []


def test_two_approvals_needed_show_the_first_and_release_on_the_second(slack_app: Factory) -> None:
    app = slack_app(**LIVE, LOCKGUARD_APPROVERS="U0ALICE,U0BOB", LOCKGUARD_REQUIRED_APPROVALS="2")
    token = app.plant()
    case_id, post = app.scan()
    assert "Two different approvers are needed" in blocks_text(post)
    approve(app, case_id, post, user="U0ALICE")
    first = updates(app)[0]
    assert "Waiting for a second approval" in first.body["text"]
    assert "Approved by <@U0ALICE>" in blocks_text(first)
    assert buttons(first) == {ids.APPROVE: case_id, ids.REJECT: case_id}
    assert app.r.get(b"lock:stuck") == token
    approve(app, case_id, post, user="U0ALICE")
    assert "You already approved" in ephemeral(app)[0].body["text"]
    assert app.r.get(b"lock:stuck") == token
    approve(app, case_id, post, user="U0BOB")
    final = updates(app, 2)[1]
    assert "Released" in final.body["text"]
    assert app.r.exists(b"lock:stuck") == 0


def test_two_clicks_at_once_release_once_and_the_other_is_told(slack_app: Factory) -> None:
    app = slack_app(**LIVE, LOCKGUARD_APPROVERS="U0ALICE,U0BOB")
    app.plant()
    events = Events(app.r)
    case_id, post = app.scan()
    go = threading.Barrier(2)

    def click(user: str) -> None:
        go.wait()
        approve(app, case_id, post, user=user)

    threads = [threading.Thread(target=click, args=(u,)) for u in ("U0ALICE", "U0BOB")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    [told] = ephemeral(app)
    assert "already decided by <@U0" in told.body["text"]
    assert "Approved by <@U0" in blocks_text(released_update(app))  # the release has ended
    app.idle()  # and so has the work of both clicks
    assert len(events.rest()) == 1
    assert app.r.exists(b"lock:stuck") == 0


def test_reject_opens_the_modal_and_records_the_reason(slack_app: Factory) -> None:
    app = slack_app(**LIVE, LOCKGUARD_APPROVERS="U0ALICE")
    token = app.plant()
    case_id, post = app.scan()
    assert app.click(ids.REJECT, case_id, trigger_id="1.2.trig").status == 200
    opened = app.fake.wait_for("views.open")[0]
    assert opened.body["trigger_id"] == "1.2.trig"
    view = opened.body["view"]
    check_view(view)
    assert (view["callback_id"], view["private_metadata"]) == (ids.REJECT_MODAL, case_id)

    empty = app.submit_reject(case_id, "   ")
    assert empty.status == 200
    assert empty.json()["response_action"] == "errors"
    assert ids.REJECT_REASON_BLOCK in empty.json()["errors"]

    done = app.submit_reject(case_id, "the <!here> export still runs")
    assert (done.status, done.body) == (200, b"")
    update = updates(app)[0]
    assert (update.body["channel"], update.body["ts"]) == (ALERTS, app.posted_ts(post))
    assert "Rejected" in update.body["text"]
    shown = blocks_text(update)
    assert "Rejected by <@U0ALICE>" in shown
    assert "the &lt;!here&gt; export still runs" in shown
    assert buttons(update) == {}
    assert app.r.get(b"lock:stuck") == token
    approve(app, case_id, post)
    assert "already decided by <@U0ALICE>" in ephemeral(app)[0].body["text"]


def test_a_non_approver_cannot_reject(slack_app: Factory) -> None:
    app = slack_app(**LIVE, LOCKGUARD_APPROVERS="U0ALICE")
    app.plant()
    case_id, _post = app.scan()
    app.submit_reject(case_id, "nope", user_id="U0MALLORY")
    [told] = ephemeral(app)
    assert (told.body["channel"], told.body["user"]) == (ALERTS, "U0MALLORY")
    assert "not an approver" in told.body["text"]
    assert app.fake.calls("chat.update") == []


def test_in_dry_run_an_approval_changes_no_lock_and_says_dry_run(slack_app: Factory) -> None:
    app = slack_app()  # LOCKGUARD_DRY_RUN defaults to true
    token = app.plant()
    events = Events(app.r)
    case_id, post = app.scan()
    assert buttons(post)[ids.APPROVE] == case_id
    approve(app, case_id, post, user="U0ANYONE")
    update = updates(app)[0]
    assert "dry run" in update.body["text"]
    assert "no lock was touched" in blocks_text(update)
    assert app.r.get(b"lock:stuck") == token
    assert app.r.pttl(b"lock:stuck") == -1
    assert events.rest() == []


def test_buttons_still_work_after_a_restart(slack_app: Factory) -> None:
    first = slack_app(**LIVE)
    first.plant()
    case_id, post = first.scan()
    first.served.stop()
    second = slack_app(**LIVE)
    # The click's copy says another ts: the message Redis recorded is the one rewritten.
    assert second.click(ids.APPROVE, case_id, message_ts="1700000000.999999").status == 200
    update = updates(second)[0]
    assert (update.body["channel"], update.body["ts"]) == (ALERTS, second.posted_ts(post))
    assert "Released" in update.body["text"]
    assert second.r.exists(b"lock:stuck") == 0


def test_a_dry_run_button_clicked_once_lockguard_is_live_releases_nothing(
    slack_app: Factory,
) -> None:
    """The message was posted in dry run ("Approve (dry run)": its dialog says no lock is
    touched); lockguard restarted live. That click approves nothing: the person is told, and the
    message is rewritten with the live buttons; a click on those releases."""
    first = slack_app()  # LOCKGUARD_DRY_RUN defaults to true
    token = first.plant()
    case_id, post = first.scan()
    assert "Approve (dry run)" in str(post.body["blocks"])
    first.served.stop()
    second = slack_app(**LIVE)
    reply = second.click(
        ids.APPROVE, case_id, message_ts=second.posted_ts(post), text="Approve (dry run)"
    )
    assert reply.status == 200
    [told] = ephemeral(second)
    assert "offered a dry run, and lockguard is live now" in told.body["text"]
    [update] = updates(second)
    assert (update.body["channel"], update.body["ts"]) == (ALERTS, second.posted_ts(post))
    assert "Approve (dry run)" not in str(update.body["blocks"])
    assert "Approve" in str(update.body["blocks"])
    second.idle()
    assert second.r.get(b"lock:stuck") == token
    approve(second, case_id, post, text="Approve")
    assert "Released" in released_update(second).body["text"]
    assert second.r.exists(b"lock:stuck") == 0


def reject_through_the_modal(app: SlackAppHarness, case_id: str, post: Call) -> None:
    """Reject clicked on `post`, the modal opened, submitted with a reason."""
    opened = len(app.fake.calls("views.open"))
    click = app.click(ids.REJECT, case_id, user_id="U0ALICE", message_ts=app.posted_ts(post))
    assert click.status == 200
    app.fake.wait_for("views.open", opened + 1)
    # a person takes seconds to type a reason; the click's work (recording the message it came
    # from, when Redis had lost it) runs on lockguard's pool meanwhile
    deadline = time.monotonic() + 5
    while not app.r.exists(slack_message_key(case_id)) and time.monotonic() < deadline:
        time.sleep(0.02)
    done = app.submit_reject(case_id, "the nightly export still runs")
    assert (done.status, done.body) == (200, b"")


def test_a_case_opened_by_a_second_scan_is_rejected_through_the_modal_and_shown(
    slack_app: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    """The first scan finds the lock too new to offer; the second opens its case. Rejecting it
    through the modal rewrites the second scan's message (was: no chat.update, and serve logged
    `case_message_unknown`)."""
    caplog.set_level(logging.INFO, logger="lockguard")
    app = slack_app(**LIVE, LOCKGUARD_APPROVERS="U0ALICE")  # threshold 30 s
    token = app.plant(b"lock:young", age_ms=27_000)
    first_id, first = app.scan()
    assert first_id == ""
    assert "not offered: held 27s so far" in blocks_text(first)
    time.sleep(3.5)  # now held past the threshold
    case_id, post = app.scan()
    assert case_id
    reject_through_the_modal(app, case_id, post)
    [update] = updates(app)
    assert (update.body["channel"], update.body["ts"]) == (ALERTS, app.posted_ts(post))
    assert "Rejected" in update.body["text"]
    assert "the nightly export still runs" in blocks_text(update)
    assert buttons(update) == {}
    assert app.r.hget(case_key(case_id), "state") == b"rejected"
    assert app.r.get(b"lock:young") == token
    assert "case_message_unknown" not in caplog.text


def test_the_reject_modal_rewrites_the_message_it_came_from_when_redis_has_no_record(
    slack_app: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever lost the record of where the case's message is (Redis refused the write, a
    failover), the message Reject was clicked on is what the modal's submission rewrites."""
    caplog.set_level(logging.INFO, logger="lockguard")
    app = slack_app(**LIVE, LOCKGUARD_APPROVERS="U0ALICE")
    app.plant()
    case_id, post = app.scan()
    # the post records where it is just after chat.postMessage returns: lose that record only
    # once it is there (deleted before, the late save put it back and nothing was adopted)
    deadline = time.monotonic() + 5
    while not app.r.exists(slack_message_key(case_id)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert app.r.delete(slack_message_key(case_id)) == 1
    reject_through_the_modal(app, case_id, post)
    [update] = updates(app)
    assert (update.body["channel"], update.body["ts"]) == (ALERTS, app.posted_ts(post))
    assert "Rejected" in update.body["text"]
    assert "case_message_adopted" in caplog.text
    assert "case_message_unknown" not in caplog.text


def test_a_reject_click_naming_no_case_of_ours_records_no_message(slack_app: Factory) -> None:
    app = slack_app(**LIVE, LOCKGUARD_APPROVERS="U0ALICE")
    assert app.click(ids.REJECT, "LG-200101-abcdef", trigger_id="1.2.none").status == 200
    app.fake.wait_for("views.open")
    app.settle()
    assert app.r.exists(slack_message_key("LG-200101-abcdef")) == 0
