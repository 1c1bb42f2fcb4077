"""Block Kit limits are checked loudly, naming the block; text helpers keep mrkdwn inert."""

from __future__ import annotations

import re
from typing import Any

import pytest

from bot.core.display import unescape
from bot.slack.blocks.kit import BLOCKS_JSON, blocks_size, button, context, header, pack, section
from bot.slack.blocks.text import code, cut, date, mention, mrkdwn, plain, redis_text
from tests.block_kit import check_message, check_view


def msg(*blocks: dict[str, Any], text: str = "fallback") -> dict[str, Any]:
    return {"text": text, "blocks": list(blocks)}


def raw_section(text: str, block_id: str | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "section", "text": {"type": "mrkdwn", "text": text}}
    if block_id:
        block["block_id"] = block_id
    return block


def test_a_valid_message_passes() -> None:
    check_message(msg(header("title"), section("body"), context("a", "b")))


@pytest.mark.parametrize(
    ("message", "words"),
    [
        (msg(*[raw_section("x") for _ in range(51)]), "51 blocks; Slack allows at most 50"),
        (
            msg(raw_section("ok"), raw_section("x" * 3001, "findings_2")),
            "blocks[1] (section 'findings_2') text: 3001 characters; Slack allows at most 3000",
        ),
        (
            msg({"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}),
            "blocks[0] (header) text: 151 characters; Slack allows at most 150",
        ),
        (
            msg({"type": "header", "text": {"type": "mrkdwn", "text": "h"}}),
            "blocks[0] (header) text: type 'mrkdwn'; expected plain_text",
        ),
        (
            msg({"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11}),
            "blocks[0] (section) fields: 11 items",
        ),
        (
            msg({"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2001}]}),
            "blocks[0] (section) fields[0]: 2001 characters",
        ),
        (
            msg({"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 11}),
            "blocks[0] (context) elements: 11 items",
        ),
        (
            msg({"type": "actions", "elements": [button("b", f"a{i}", "v") for i in range(26)]}),
            "blocks[0] (actions) elements: 26 items",
        ),
        (
            msg(
                {
                    "type": "actions",
                    "elements": [
                        {
                            "type": "button",
                            "text": {"type": "plain_text", "text": "b" * 76},
                            "action_id": "a",
                        }
                    ],
                }
            ),
            "blocks[0] (actions) elements[0] text: 76 characters",
        ),
        (
            msg({"type": "actions", "elements": [button("b", "a", "v" * 2001)]}),
            "elements[0]: value must be text of at most 2000",
        ),
        (
            msg({"type": "actions", "elements": [button("b", "a" * 256, "v")]}),
            "elements[0] action_id: must be 1 to 255",
        ),
        (msg(raw_section("x", "b" * 256)), "block_id: must be 1 to 255"),
        (msg(raw_section("x", "same"), raw_section("y", "same")), "block_id 'same' is used twice"),
        (msg(raw_section("")), "blocks[0] (section) text: text is missing or empty"),
        (msg({"type": "carousel"}), "unknown block type 'carousel'"),
        (msg(raw_section("x"), text=""), "`text` (the notification fallback) is missing"),
        (msg(raw_section("x"), text="t" * 4001), "`text` is 4001 characters; at most 4000"),
        (msg(*[raw_section("x" * 2900) for _ in range(5)]), "msg_blocks_too_long"),
    ],
)
def test_a_broken_limit_is_named(message: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        check_message(message)


def test_cumulative_size_counts_the_blocks_json() -> None:
    blocks = [raw_section("x" * 2900) for _ in range(4)]
    assert blocks_size(blocks) < BLOCKS_JSON
    check_message(msg(*blocks))


def test_view_limits() -> None:
    good: dict[str, Any] = {
        "type": "modal",
        "title": {"type": "plain_text", "text": "t"},
        "blocks": [raw_section("x")],
    }
    check_view(good)
    with pytest.raises(ValueError, match="view title: 25 characters"):
        check_view({**good, "title": {"type": "plain_text", "text": "t" * 25}})
    with pytest.raises(ValueError, match="101 blocks; Slack allows at most 100"):
        check_view({**good, "blocks": [raw_section("x") for _ in range(101)]})
    check_view({**good, "blocks": [raw_section("x") for _ in range(60)]})  # 100 in a modal
    with pytest.raises(ValueError, match="private_metadata"):
        check_view({**good, "private_metadata": "m" * 3001})


def test_pack_stays_within_its_budget_and_block_count() -> None:
    lines = [f"line {i} " + "x" * 100 for i in range(1000)]
    blocks, used = pack(lines, budget=5_000, max_blocks=3)
    assert 0 < used < 1000
    assert blocks_size(blocks) <= 5_000
    assert len(blocks) <= 3
    joined = "\n".join(b["text"]["text"] for b in blocks)
    assert joined.split("\n") == lines[:used]
    blocks, used = pack(lines[:10], budget=100_000, max_blocks=50)
    assert used == 10
    assert len(blocks) == 1


# -- text -------------------------------------------------------------------------------------


def test_mrkdwn_escapes_slacks_three_characters() -> None:
    assert mrkdwn("a & <!here> > b") == "a &amp; &lt;!here&gt; &gt; b"


def test_code_neutralises_backticks_and_edge_spaces_and_round_trips() -> None:
    shown = code("a`b ")
    assert shown == "`a\\x60b\\x20`"
    assert unescape(shown[1:-1]) == b"a`b "
    assert code("") == "_(empty)_"


def test_redis_text_truncates_long_and_escapes_binary() -> None:
    assert redis_text(b"\x00\xff") == "`\\x00\\xff`"
    long = redis_text(b"k" * 10_000)
    assert long.endswith("…(+9880 chars)`")
    assert len(long) < 200


def test_cut_marks_what_it_cut() -> None:
    assert cut("short", 10) == "short"
    assert cut("a" * 20, 10) == "a" * 9 + "…"
    assert len(cut("a" * 20, 10)) == 10


def test_plain_cut_never_splits_an_entity() -> None:
    out = plain("<" * 100, 50)
    assert len(out) <= 50
    assert out.endswith("&lt;…")


def test_date_token_has_a_utc_fallback() -> None:
    assert date(1_800_000_000_123) == (
        "<!date^1800000000^{date_short_pretty} {time}|2027-01-15 08:00 UTC>"
    )


def test_mention_only_for_slack_user_ids() -> None:
    assert mention("U024BE7LH") == "<@U024BE7LH>"
    assert mention("ann") == "`ann`"
    assert mention("<!channel>") == "`&lt;!channel&gt;`"


def test_slack_sdk_models_accept_every_block_as_built() -> None:
    """A second opinion on names and shapes: slack_sdk parses, validates and re-serialises each
    block to the same dict."""
    from slack_sdk.models.blocks import Block
    from slack_sdk.models.views import View

    from bot.slack.blocks.case_message import reject_modal
    from bot.slack.blocks.kit import actions, confirm, divider, fields
    from bot.slack.blocks.status import help_message

    built = [
        header("h"),
        section("s"),
        fields("a", "b"),
        context("c"),
        divider(),
        actions(
            "act",
            button("Approve", "a1", "LG-1", style="primary", confirm_with=confirm("t", "x", "ok")),
            button("Reject", "a2", "LG-1", style="danger"),
        ),
        *help_message()["blocks"],
    ]
    for block in built:
        model = Block.parse(block)
        assert model is not None
        model.validate_json()
        assert model.to_dict() == block
    View(**reject_modal("LG-270115-abcdef")).validate_json()
