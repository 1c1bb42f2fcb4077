"""Block Kit to terminal text (`bot.slack.blocks.render_text`): each block kind, mrkdwn undone,
and the app's own messages read back without markup."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bot.cases.case import Case, CaseLock, State
from bot.core.display import unescape
from bot.core.model import Layout, Reason
from bot.slack.blocks import kit as bk
from bot.slack.blocks.case_message import case_message
from bot.slack.blocks.render_text import DIVIDER, mrkdwn_to_text, render_blocks, render_message
from bot.slack.blocks.text import code, date, mention, mrkdwn, plain, redis_text

NOW = 1_800_000_000_000  # 2027-01-15 08:00 UTC


def test_each_block_kind_becomes_lines() -> None:
    blocks = [
        bk.header("Case LG-1: Released"),
        bk.section("*Bold* and _italic_ and ~struck~"),
        bk.fields("*Redis*\n`cache:6379`", "*Keys scanned*\n12", "alone"),
        bk.context("one", "two"),
        bk.divider(),
        bk.actions(
            "b", bk.button("Approve", "a", "v", style="primary"), bk.button("Reject", "r", "v")
        ),
        {"type": "image", "image_url": "https://x/y.png", "alt_text": "a chart"},
        {
            "type": "section",
            "text": bk.plain_text("plain *not bold*", 100),
            "accessory": bk.button("Open", "o", "v"),
        },
        {
            "type": "actions",
            "elements": [{"type": "static_select", "placeholder": bk.plain_text("Pick", 50)}],
        },
        {"type": "input", "label": bk.plain_text("Why reject it?", 50), "element": {}},
        {
            "type": "rich_text",
            "elements": [
                {
                    "type": "rich_text_section",
                    "elements": [
                        {"type": "text", "text": "hello "},
                        {"type": "user", "user_id": "U1"},
                    ],
                }
            ],
        },
        {"type": "something_new"},
    ]
    assert render_blocks(blocks).splitlines() == [
        "Case LG-1: Released",
        "===================",
        "Bold and italic and struck",
        "Redis: cache:6379",
        "Keys scanned: 12",
        "alone",
        "one | two",
        DIVIDER,
        "[ Approve ]  [ Reject ]",
        "[image: a chart]",
        "plain *not bold*",  # plain_text is shown as written
        "[ Open ]",
        "[ Pick v ]",
        "Why reject it?: [ ______ ]",
        "hello @U1",
    ]


def test_slack_tokens_become_what_slack_shows() -> None:
    users = {"U0ALICE": "alice"}
    text = (
        f"{mention('U0ALICE')} and {mention('U0BOB')} in <#C123|ops> <#C456>, <!here>, "
        f"<!subteam^S1|@oncall>, <https://example.com/a_b_c|the runbook>, "
        f"<https://example.com>, at {date(NOW)}"
    )
    assert mrkdwn_to_text(text, users) == (
        "@alice and @U0BOB in #ops #C456, @here, @oncall, the runbook (https://example.com/a_b_c), "
        "https://example.com, at 2027-01-15 08:00 UTC"
    )


def test_code_keeps_what_it_shows_and_formatting_around_it_goes() -> None:
    assert mrkdwn_to_text("*Case `LG-1`* has `*a*_b_`") == "Case LG-1 has *a*_b_"
    assert (
        mrkdwn_to_text("```\nVERDICT  KEY\nstale    lock:a\n```") == "VERDICT  KEY\nstale    lock:a"
    )
    assert mrkdwn_to_text("snake_case_word and 2*3*4 stay") == "snake_case_word and 2*3*4 stay"
    assert mrkdwn_to_text(code("<@U1> & <!channel>")) == "<@U1> & <!channel>"
    assert mrkdwn_to_text("a\x000\x00 `b`") == "a\\x000\\x00 b"  # NUL is shown, not a slot


def test_a_message_without_blocks_shows_its_text() -> None:
    assert render_message({"text": "*Done*: a &amp; b"}) == "Done: a & b"
    assert render_message({"text": "x", "blocks": [bk.section("from blocks")]}) == "from blocks"


@given(
    st.text(
        alphabet=st.characters(blacklist_characters="*_~`\x00", blacklist_categories=("Cs", "Cc")),
        max_size=80,
    )
)
def test_escaped_words_read_back_as_typed(typed: str) -> None:
    """(Control characters are shown as `\\xHH` by `plain`: see the test below.)"""
    assert mrkdwn_to_text(plain(typed)) == typed
    assert mrkdwn_to_text(mrkdwn(typed)) == typed


def test_control_characters_in_words_are_shown_not_sent() -> None:
    assert plain("stuck\x00\x1b[31m\nnext") == "stuck\\x00\\x1b[31m\nnext"


@given(st.binary(max_size=60))
def test_redis_bytes_shown_as_code_read_back_as_the_bytes(data: bytes) -> None:
    shown = mrkdwn_to_text(redis_text(data, limit=10_000))
    assert "`" not in shown
    if data:
        assert unescape(shown) == data
    else:
        assert shown == "(empty)"


def test_the_apps_released_case_message_reads_without_markup() -> None:
    lk = CaseLock(
        key=b"lock:<a&b>`x`",
        layout=Layout.REDIS_PY,
        identity=b"tok",
        reason=Reason.STALE_LEASE,
        ttl_ms=-1,
        observed_ms=NOW,
        held_seconds=7200.0,
        owner="web-1",
    )
    case = Case(
        id="LG-270115-0a1b2c",
        state=State.RELEASED,
        created_ms=NOW,
        expires_ms=NOW + 3_600_000,
        locks=(lk,),
        lock_count=1,
        decided_by="U0ALICE",
        decided_ms=NOW + 60_000,
        outcomes=(
            {
                "key_hex": lk.key.hex(),
                "outcome": "released",
                "detail": "",
                "wake": [],
                "event_published": True,
            },
        ),
        outcome_counts={"released": 1},
    )
    msg = case_message(case, endpoint="cache:6379", now_ms=NOW + 90_000, dry_run=False)
    text = render_message(msg, {"U0ALICE": "alice"})
    lines = text.splitlines()
    assert lines[0] == "Case LG-270115-0a1b2c: Released"
    assert "Approved by @alice at 2027-01-15 08:01 UTC. 1 of 1 lock released." in lines
    assert r"lock:<a&b>\x60x\x60" in text
    for markup in ("<!date", "<@", "&lt;", "&amp;", "*", "`"):
        assert markup not in text, markup
