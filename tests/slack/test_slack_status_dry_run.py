"""A dry-run approval is final, not open: `/lockguard status` lists it on its own line
("Approved (dry run)"), not under "Open cases", and `/metrics` counts it as approved."""

from __future__ import annotations

from bot.slack.blocks import ids
from tests.ops.test_ops_serve import metrics, status_text
from tests.slack_app_harness import Factory, buttons
from tests.slack_app_harness import slack_app as slack_app  # the fixture


def test_a_dry_run_approval_is_not_an_open_case_in_status_nor_metrics(
    slack_app: Factory,
) -> None:
    app = slack_app()  # LOCKGUARD_DRY_RUN defaults to true
    token = app.plant()
    case_id, post = app.scan()
    assert buttons(post)[ids.APPROVE] == case_id
    app.served.ops.check()
    assert metrics(app)[("lockguard_cases", (("state", "pending"),))] == 1
    before = status_text(app, "before")
    assert "*Open cases*: 1" in before
    assert "Approved (dry run)" not in before

    reply = app.click(ids.APPROVE, case_id, message_ts=app.posted_ts(post))
    assert reply.status == 200
    [update] = app.fake.wait_for("chat.update")
    assert "dry run" in update.body["text"]
    assert app.r.get(b"lock:stuck") == token

    after = status_text(app, "after")
    assert "*Open cases*: none" in after
    assert "*Approved (dry run)*: 1 recent case, closed with nothing released" in after
    assert "0 open cases" in after  # the notification text
    app.served.ops.check()  # what the check loop does every 30 s: lockguard_cases refreshed
    got = metrics(app)
    assert got[("lockguard_cases", (("state", "approved"),))] == 1
    assert got[("lockguard_cases", (("state", "pending"),))] == 0
