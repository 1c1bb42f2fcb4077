"""`lockguard serve`'s safe defaults: it refuses to start (exit 2, before Redis or Slack is
touched) when nobody is named to approve, unless `LOCKGUARD_APPROVERS=*` says that any member of
the channel may decide, and when a secret is too short to mask in its logs; `*` then lets anyone
in the channel scan and decide, and the findings message says so."""

from __future__ import annotations

import pytest
import redis

from bot import cli
from bot.config import load_settings
from bot.core.errors import ConfigError
from bot.slack.approvers import Approvers, scanners_of
from bot.slack.blocks import ids
from tests.slack_app_harness import Factory, blocks_text
from tests.slack_app_harness import slack_app as slack_app  # the fixture
from tests.slack_mock import FakeSlack
from tests.test_serve import connections
from tests.test_serve import env as env  # the fixture
from tests.test_serve import fake as fake  # the fixture

NOBODY = (
    "lockguard: error: LOCKGUARD_APPROVERS / LOCKGUARD_APPROVER_GROUP: serve needs to know who "
    "may approve releases"
)


def refused(capsys: pytest.CaptureFixture[str], real_redis: redis.Redis, fake: FakeSlack) -> str:
    """serve's stderr, once it has refused to start without touching Redis or Slack."""
    before = connections(real_redis)
    assert cli.main(["serve"]) == 2
    assert connections(real_redis) == before
    assert fake.calls() == []
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("blank", [None, "", " , "])
def test_serve_without_approvers_refuses_to_start_naming_both_settings(
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    fake: FakeSlack,
    real_redis: redis.Redis,
    capsys: pytest.CaptureFixture[str],
    blank: str | None,
) -> None:
    if blank is None:
        monkeypatch.delenv("LOCKGUARD_APPROVERS")
    else:
        monkeypatch.setenv("LOCKGUARD_APPROVERS", blank)
    err = refused(capsys, real_redis, fake)
    [line] = err.splitlines()
    assert line.startswith(NOBODY)
    assert "LOCKGUARD_APPROVERS=* lets any member of LOCKGUARD_SLACK_CHANNEL decide" in line


def test_star_with_a_group_or_with_user_ids_is_refused(
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    fake: FakeSlack,
    real_redis: redis.Redis,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("LOCKGUARD_APPROVER_GROUP", "S0ONCALL")
    assert (
        "lockguard: error: LOCKGUARD_APPROVERS: * (any member of the channel may decide) cannot "
        "be combined with LOCKGUARD_APPROVER_GROUP" in refused(capsys, real_redis, fake)
    )
    with pytest.raises(ConfigError, match="LOCKGUARD_APPROVERS: expected either \\* alone"):
        load_settings({"LOCKGUARD_APPROVERS": "*,U0ALICE"})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SLACK_SIGNING_SECRET", "Zq7"),
        ("SLACK_BOT_TOKEN", "xoxb-Zq"),
        ("REDIS_PASSWORD", "Zq7x"),
        ("REDIS_URL", "redis://:Zq7x@127.0.0.1:{port}/0"),
    ],
)
def test_a_secret_too_short_to_mask_is_refused_naming_the_variable_never_the_value(
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    fake: FakeSlack,
    real_redis: redis.Redis,
    redis_server: object,
    capsys: pytest.CaptureFixture[str],
    name: str,
    value: str,
) -> None:
    monkeypatch.setenv(name, value.format(port=redis_server.port))  # type: ignore[attr-defined]
    if name == "REDIS_URL":  # instead of REDIS_HOST / REDIS_PORT (beside it: a warning)
        monkeypatch.delenv("REDIS_HOST", raising=False)
        monkeypatch.delenv("REDIS_PORT", raising=False)
    err = refused(capsys, real_redis, fake)
    [line] = err.splitlines()
    assert line.startswith(f"lockguard: error: {name}: ")
    assert "shorter than 8 characters" in line
    assert "garble" in line
    assert "Zq" not in line


def test_the_cli_commands_still_take_a_short_redis_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only serve refuses it: a scan or check from a terminal is short and watched."""
    s = load_settings({"REDIS_PASSWORD": "Zq7x"})
    assert s.redis_password is not None
    assert "REDIS_PASSWORD" in " ".join(s.serve_problems())


def test_star_lets_anyone_in_the_channel_scan_and_decide_and_says_so(slack_app: Factory) -> None:
    app = slack_app(LOCKGUARD_DRY_RUN="false", LOCKGUARD_APPROVERS="*")
    app.plant(b"lock:stuck")
    case_id, post = app.scan(user_id="U0ANYONE")
    assert "Any member of this channel may decide" in blocks_text(post)
    reply = app.click(
        ids.APPROVE, case_id, user_id="U0SOMEONE", message_ts=str(post.response["ts"])
    )
    assert reply.status == 200
    update = app.fake.wait_for("chat.update")[0]
    assert "Approved by <@U0SOMEONE>" in blocks_text(update)
    assert app.fake.calls("chat.postEphemeral") == []


def test_star_in_the_approver_check_allows_our_team_only() -> None:
    approvers = Approvers(None, ("*",))  # type: ignore[arg-type]  # no Slack call is made
    assert approvers.anyone
    assert approvers.note() == "Any member of this channel may decide."
    assert approvers.check("U0ANYONE", "T0OURS", "T0OURS").allowed
    other = approvers.check("U0ANYONE", "T0OTHER", "T0OURS")
    assert not other.allowed
    assert "another team" in other.refusal
    scanners = scanners_of(None, (), None, approvers)  # type: ignore[arg-type]
    assert scanners.check("U0ANYONE", "T0OURS", "T0OURS").allowed


def test_an_approver_check_with_nobody_named_refuses_everyone_and_says_why() -> None:
    """`serve` refuses to start without approvers; an app built some other way with nobody
    named lets no one decide or scan (it used to let everyone)."""
    approvers = Approvers(None)  # type: ignore[arg-type]  # no Slack call is made
    refused = approvers.check("U0ANYONE", "T0OURS", "T0OURS")
    assert not refused.allowed
    assert "No one is named to decide (LOCKGUARD_APPROVERS" in refused.refusal
    scanners = scanners_of(None, (), None, approvers)  # type: ignore[arg-type]
    assert not scanners.check("U0ANYONE", "T0OURS", "T0OURS").allowed
