"""A case of more than LOCKGUARD_CONFIRM_TYPED_ABOVE locks is approved by typing their number in
a modal, through Slack's protocol: the click opens the modal (`views.open`), a wrong number is
answered under the input and releases nothing (real redis-server), the right one releases as a
click on a small case does, and the approver is checked at the click and at the submission.
"""

from __future__ import annotations

import pytest

from bot.slack.blocks import ids
from bot.store.keyspace import case_key, slack_message_key
from tests.block_kit import check_view
from tests.slack.test_slack_app_decisions import ephemeral, released_update
from tests.slack_app_harness import Factory, SlackAppHarness, blocks_text, buttons
from tests.slack_app_harness import slack_app as slack_app  # the fixture
from tests.slack_mock import Call

BIG = {
    "LOCKGUARD_DRY_RUN": "false",
    "LOCKGUARD_APPROVERS": "U0ALICE",
    "LOCKGUARD_CONFIRM_TYPED_ABOVE": "3",
}
KEYS = [f"lock:big:{i}".encode() for i in range(1, 6)]


def big_case(app: SlackAppHarness, keys: list[bytes] = KEYS) -> tuple[str, Call]:
    for key in keys:
        app.plant(key)
    return app.scan()


def approve_button(post: Call) -> dict[str, object]:
    for block in post.body.get("blocks") or []:
        for el in block.get("elements", []) if block.get("type") == "actions" else []:
            if el["action_id"] == ids.APPROVE:
                return dict(el)
    raise AssertionError("no Approve button")


def still_held(app: SlackAppHarness, keys: list[bytes] = KEYS) -> int:
    return int(app.r.exists(*keys))


def test_the_click_opens_the_modal_and_only_the_right_number_releases(slack_app: Factory) -> None:
    app = slack_app(**BIG)
    case_id, post = big_case(app)
    assert "confirm" not in approve_button(post)  # the modal replaces the dialog
    reply = app.click(ids.APPROVE, case_id, trigger_id="9.9.big", message_ts=app.posted_ts(post))
    assert reply.status == 200
    opened = app.fake.wait_for("views.open")[0]
    assert opened.body["trigger_id"] == "9.9.big"
    view = opened.body["view"]
    check_view(view)
    assert (view["callback_id"], view["private_metadata"]) == (ids.APPROVE_MODAL, case_id)
    shown = str(view)
    assert f"Type 5 to release 5 locks from case {case_id}" in shown
    assert "lock:big:1" in shown
    assert "more than 3" in shown
    assert app.fake.calls("chat.update") == []

    for typed in ("4", "", "five", "5" * 40, "-5"):
        wrong = app.submit_approve(case_id, typed)
        assert wrong.status == 200
        answer = wrong.json()
        assert answer["response_action"] == "errors"
        assert "type 5" in answer["errors"][ids.APPROVE_COUNT_BLOCK]
    assert still_held(app) == 5
    assert app.r.hget(case_key(case_id), "state") == b"pending"

    done = app.submit_approve(case_id, "5")
    assert (done.status, done.body) == (200, b"")
    update = released_update(app)
    assert update.body["ts"] == app.posted_ts(post)
    assert "Approved by <@U0ALICE>" in blocks_text(update)
    assert buttons(update) == {}
    assert still_held(app) == 0
    app.idle()  # the submission's work has finished, not only its update
    assert app.fake.calls("chat.postEphemeral") == []


def test_a_non_approver_gets_no_modal_and_their_submission_is_refused(slack_app: Factory) -> None:
    app = slack_app(**BIG)
    case_id, post = big_case(app)
    app.click(ids.APPROVE, case_id, user_id="U0MALLORY", message_ts=app.posted_ts(post))
    assert "not an approver" in ephemeral(app)[0].body["text"]
    assert app.submit_approve(case_id, "5", user_id="U0MALLORY").body == b""
    [_, told] = ephemeral(app, 2)
    assert (told.body["user"], "not an approver" in told.body["text"]) == ("U0MALLORY", True)
    app.settle()
    assert app.fake.calls("views.open") == []
    assert still_held(app) == 5
    assert app.fake.calls("chat.update") == []


def test_a_case_at_the_limit_approves_on_the_click_as_before(slack_app: Factory) -> None:
    app = slack_app(**BIG)
    case_id, post = big_case(app, KEYS[:3])
    assert "confirm" in approve_button(post)
    app.click(ids.APPROVE, case_id, message_ts=app.posted_ts(post))
    assert "Approved by <@U0ALICE>" in blocks_text(released_update(app))
    assert still_held(app, KEYS[:3]) == 0
    assert app.fake.calls("views.open") == []


@pytest.mark.parametrize("metadata", ["", "LG-000000-zzzzzz", "<!channel> " + "x" * 5000])
def test_a_submission_naming_no_case_of_ours_releases_nothing(
    slack_app: Factory, metadata: str
) -> None:
    app = slack_app(**BIG)
    case_id, _ = big_case(app)
    answer = app.submit_approve(metadata, "5").json()
    assert answer["response_action"] == "errors"
    message = answer["errors"][ids.APPROVE_COUNT_BLOCK]
    assert len(message) <= 150
    assert "<!channel>" not in message
    assert still_held(app) == 5
    assert app.r.hget(case_key(case_id), "state") == b"pending"


def test_a_modal_slack_would_not_open_is_told_to_the_clicker(slack_app: Factory) -> None:
    app = slack_app(**BIG)
    case_id, post = big_case(app)
    app.fake.fail("views.open", "expired_trigger_id")
    app.click(ids.APPROVE, case_id, message_ts=app.posted_ts(post))
    told = ephemeral(app)[0].body
    assert "expired_trigger_id" in told["text"]
    assert "click Approve again" in told["text"]
    assert still_held(app) == 5


def test_in_dry_run_the_modal_says_so_and_touches_nothing(slack_app: Factory) -> None:
    app = slack_app(**{**BIG, "LOCKGUARD_DRY_RUN": "true"})
    case_id, post = big_case(app)
    app.click(ids.APPROVE, case_id, message_ts=app.posted_ts(post))
    view = app.fake.wait_for("views.open")[0].body["view"]
    check_view(view)
    assert "in dry run" in str(view)
    assert app.submit_approve(case_id, "5").body == b""
    update = app.fake.wait_for("chat.update")[0]
    assert "dry run" in update.body["text"]
    assert still_held(app) == 5


def test_the_approve_modal_rewrites_the_message_it_came_from_when_redis_has_no_record(
    slack_app: Factory,
) -> None:
    app = slack_app(**BIG)
    case_id, post = big_case(app)
    app.r.delete(slack_message_key(case_id))
    reply = app.click(ids.APPROVE, case_id, trigger_id="9.9.lost", message_ts=app.posted_ts(post))
    assert reply.status == 200
    app.fake.wait_for("views.open")
    app.idle()  # the click's job, which adopts the message and puts its list in, has ended
    done = app.submit_approve(case_id, "5")
    assert (done.status, done.body) == (200, b"")
    update = released_update(app)
    assert update.body["channel"] == post.body["channel"]
    assert update.body["ts"] == app.posted_ts(post)
    assert still_held(app) == 0


def test_a_dry_run_modal_submitted_once_lockguard_is_live_releases_nothing(
    slack_app: Factory,
) -> None:
    """The typed-count modal opened in dry run (its submit button says so); lockguard restarted
    live before it was submitted: nothing is approved, the person is told, the message shows the
    live buttons."""
    first = slack_app(**(BIG | {"LOCKGUARD_DRY_RUN": "true"}))
    case_id, post = big_case(first)
    click = first.click(
        ids.APPROVE, case_id, trigger_id="9.9.dry", message_ts=first.posted_ts(post)
    )
    assert click.status == 200
    view = first.fake.wait_for("views.open")[0].body["view"]
    assert view["submit"]["text"] == "Approve (dry run)"
    first.served.stop()
    second = slack_app(**BIG)
    done = second.submit_approve(case_id, "5", submit=view["submit"]["text"])
    assert (done.status, done.body) == (200, b"")
    [told] = ephemeral(second)
    assert "offered a dry run, and lockguard is live now" in told.body["text"]
    second.idle()
    assert still_held(second) == 5
    assert second.r.hget(case_key(case_id), "state") == b"pending"
