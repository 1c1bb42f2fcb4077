"""The one case line behind `/lockguard status`, `/lockguard cases`, the digest and the Home tab:
the same words everywhere, with the two real differences as parameters (a digest pings nobody;
the Home tab, a view of what still needs doing, says the time left, the approvals so far and
how to resume)."""

from __future__ import annotations

import pytest

from bot.cases.case import State
from bot.slack.blocks.case_message import case_line, outcomes_text
from bot.slack.blocks.status import cases_message
from tests.slack.test_slack_messages import HOUR, NOW, case, texts

LISTS = [
    pytest.param({}, id="status-and-cases"),
    pytest.param({"notify": False}, id="digest"),
    pytest.param({"live": True}, id="home"),
]


@pytest.mark.parametrize("how", LISTS)
def test_every_list_says_the_id_state_size_and_times_alike(how: dict[str, bool]) -> None:
    line = case_line(case(1), NOW, **how)
    assert line.startswith("`LG-270115-000001` · *Waiting for a decision* · 3 locks · opened ")
    assert " · expires " in line


@pytest.mark.parametrize(
    ("how", "decider"),
    [
        ({}, "decided by <@U0ANN> at "),
        ({"notify": False}, "decided by `U0ANN` at "),  # shown, not a mention
        ({"live": True}, "approved by <@U0ANN> at "),  # the Home tab lists open cases only
    ],
)
def test_the_decider_is_mentioned_except_in_the_digest(how: dict[str, bool], decider: str) -> None:
    done = case(2, State.INCOMPLETE, decided_by="U0ANN", decided_ms=NOW)
    assert decider in case_line(done, NOW, **how)


@pytest.mark.parametrize("how", LISTS)
def test_a_pending_case_with_one_approval_waits_for_a_second_in_every_list(
    how: dict[str, bool],
) -> None:
    half = case(3, approvals=(("U0ANN", NOW - 60_000),))
    assert "*Waiting for a second approval*" in case_line(half, NOW, **how)


def test_only_the_home_tab_counts_down_names_approvals_so_far_and_says_how_to_resume() -> None:
    half = case(4, approvals=(("U0ANN", NOW - 60_000),))
    home = case_line(half, NOW, live=True)
    assert "(in 1h00m)" in home
    assert "approved so far by <@U0ANN>" in home
    assert "(in " not in case_line(half, NOW)
    stuck = case(5, State.INCOMPLETE, decided_by="U0ANN", decided_ms=NOW)
    hint = "`lockguard approve LG-270115-000005 --by NAME --resume` retries the locks that errored"
    assert hint in case_line(stuck, NOW, live=True)
    assert "--resume" not in case_line(stuck, NOW)


@pytest.mark.parametrize("how", LISTS)
def test_reasons_and_outcomes_read_the_same_in_every_list(how: dict[str, bool]) -> None:
    done = case(
        6,
        State.REJECTED,
        decided_by="U0ANN",
        decided_ms=NOW,
        decision_reason="x" * 400,
        outcome_counts={"skipped_reacquired": 1, "released": 2},
    )
    line = case_line(done, NOW, **how)
    assert "“" + "x" * 299 + "…" in line  # at most 300 characters of a reason
    assert "2 released · 1 skipped: re-acquired since it was seen" in line


def test_outcomes_come_in_their_usual_order_and_in_words() -> None:
    counts = {"error": 1, "already_gone": 3, "released": 2, "made_up": 4}
    assert outcomes_text(counts) == "2 released · 3 already gone · 1 error · 4 made up"


def test_the_cases_message_lists_with_the_one_case_line() -> None:
    cases = [case(7, expires_ms=NOW + 2 * HOUR)]
    assert case_line(cases[0], NOW) in texts(cases_message(cases, now_ms=NOW))
