"""Who may see what, through Slack's protocol into the running app on a real redis-server:
every request from another workspace is refused before anything is read; `/lockguard status`,
`/lockguard cases` and the Home tab's details are for the viewers (LOCKGUARD_VIEWERS, else the
approvers and the scanners); anyone else is told where to ask and is shown no lock, case,
endpoint, target or pattern."""

from __future__ import annotations

import json

from bot.slack.approvers import OTHER_TEAM
from tests.slack_app_harness import ALERTS, SECRET, Factory, SlackAppHarness
from tests.slack_app_harness import slack_app as slack_app  # the fixture
from tests.slack_requests import app_home_opened, event_callback

LIVE = {"LOCKGUARD_DRY_RUN": "false", "LOCKGUARD_APPROVERS": "U0ALICE"}
ASK = f"ask in <#{ALERTS}>"
SECRETS_OF_THE_HOUSE = ("lock:payroll", "redis://", "127.0.0.1", "LG-", "lock:*")


def answer(app: SlackAppHarness, text: str, user: str, name: str) -> str:
    """`/lockguard text` typed by `user`: what came back through its response_url."""
    url = app.fake.response_url(name)
    assert app.slash(text, user_id=user, response_url=url).status == 200
    [call] = app.fake.wait_for("response_url", where=lambda c: c.target == name)
    return json.dumps(call.body, ensure_ascii=False)


def opened_home(app: SlackAppHarness, user: str, team: str = "T0LOCKGUARD") -> str:
    """The Home tab published for `user` once they open it."""
    event = app_home_opened(user)
    reply = event_callback(app.url, SECRET, event=event, team_id=team, event_id=f"Ev0{user}")
    assert reply.status == 200
    [call] = app.fake.wait_for("views.publish", where=lambda c: c.body.get("user_id") == user)
    return json.dumps(call.body["view"], ensure_ascii=False)


def test_another_workspace_is_refused_everything_before_anything_is_read(
    slack_app: Factory,
) -> None:
    app = slack_app(**LIVE)
    app.plant(b"lock:payroll:customer-4111")
    app.scan(user_id="U0ALICE")  # a case and a last scan exist to be leaked
    app.r.config_resetstat()
    for text in ("status", "cases", "scan", "scan session:*", "scan nosuch-target", "help"):
        reply = app.slash(text, user_id="U0ALICE", team_id="T0OTHERORG")
        assert reply.status == 200
        assert reply.text == OTHER_TEAM, text
    # the positive signal: our own team's status answers; the other team's got nothing more
    assert "redis://" in answer(app, "status", "U0ALICE", "ours")
    assert [c.target for c in app.fake.calls("response_url")] == ["ours"]
    home = opened_home(app, "U0ALICE", team="T0OTHERORG")
    assert OTHER_TEAM in home
    assert not any(s in home for s in SECRETS_OF_THE_HOUSE)


def test_a_member_who_neither_approves_nor_scans_is_told_where_to_ask(
    slack_app: Factory,
) -> None:
    app = slack_app(**LIVE)
    app.plant(b"lock:payroll:customer-4111")
    app.scan(user_id="U0ALICE")
    for i, text in enumerate(("status", "cases")):
        said = answer(app, text, "U0MALLORY", f"m{i}")
        assert ASK in said
        assert not any(s in said for s in SECRETS_OF_THE_HOUSE), said
    home = opened_home(app, "U0MALLORY")
    assert ASK in home
    assert not any(s in home for s in SECRETS_OF_THE_HOUSE), home
    # the approver sees it all
    assert "lock:payroll" in opened_home(app, "U0ALICE")
    assert "LG-" in answer(app, "cases", "U0ALICE", "alice")


def test_lockguard_viewers_names_who_may_see_or_anyone_of_the_workspace(
    slack_app: Factory,
) -> None:
    named = slack_app(**LIVE, LOCKGUARD_VIEWERS="U0BOB")
    named.plant(b"lock:payroll:customer-4111")
    named.scan(user_id="U0ALICE")
    assert "redis://" in answer(named, "status", "U0BOB", "bob")
    assert ASK in answer(named, "status", "U0ALICE", "alice")  # viewers set: only them
    anyone = slack_app(**LIVE, LOCKGUARD_VIEWERS="*")
    assert "redis://" in answer(anyone, "status", "U0MALLORY", "m")
