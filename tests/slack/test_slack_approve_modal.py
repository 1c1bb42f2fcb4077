"""The approve modal of a big case (pure): within Block Kit's limits for any keys, the number to
type shown as in the issue, and the typed number read strictly."""

from __future__ import annotations

import pytest

from bot.cases.case import State
from bot.cases.typed_count import needs_typed_count, typed_number
from bot.slack.blocks import ids
from bot.slack.blocks.case_message import (
    approve_modal,
    approve_submission,
    count_problem,
)
from bot.slack.blocks.findings import decision_buttons
from tests.block_kit import check_view
from tests.slack.test_slack_case_message import CASE_ID, case, lock

HOSTILE = [
    b"lock:<!channel> *x* `y`" + b"\xff" * 3000,
    b"lock:" + "é".encode() * 2000,
    b"lock:\x00\x1b[31m",
    b"lock:plain",
    b"lock:" + b"k" * 10_000,
    b"lock:sixth",
]


@pytest.mark.parametrize("dry_run", [False, True])
def test_the_modal_of_100000_locks_fits_and_says_what_to_type(dry_run: bool) -> None:
    big = case(State.PENDING, tuple(lock(k) for k in HOSTILE), lock_count=100_000)
    view = approve_modal(big, dry_run=dry_run, typed_above=1000)
    check_view(view)
    text = str(view)
    assert (view["callback_id"], view["private_metadata"]) == (ids.APPROVE_MODAL, CASE_ID)
    if not dry_run:
        assert f"Type 100000 to release 100,000 locks from case {CASE_ID}" in text
    assert "<!channel>" not in text
    assert "lock:plain" in text
    assert "lock:sixth" not in text
    assert "99,995 more locks" in text


@pytest.mark.parametrize(
    ("typed", "number"),
    [
        ("100000", 100000),
        (" 100,000 ", 100000),
        ("5", 5),
        ("1,000,000", 1000000),
        ("", None),
        ("1e5", None),
        ("-5", None),
        ("10,00", None),
        ("\u0665", None),
        ("5 5", None),
        ("9" * 16, None),
        ("0x10", None),
    ],
)
def test_the_typed_number_is_read_strictly(typed: str, number: int | None) -> None:
    assert typed_number(typed) == number


def test_count_problem_names_the_number_expected() -> None:
    five = case(State.PENDING, lock_count=5)
    assert count_problem(five, "5") == ""
    assert count_problem(five, "5,000") != ""
    for typed in ("", "4", "x"):
        problem = count_problem(five, typed)
        assert "type 5" in problem
        assert "Nothing was released" in problem
        assert len(problem) <= 150


def test_a_submission_is_bounded_whatever_it_carries() -> None:
    view = {
        "private_metadata": "LG-" + "x" * 5000,
        "state": {
            "values": {ids.APPROVE_COUNT_BLOCK: {ids.APPROVE_COUNT_ACTION: {"value": "9" * 5000}}}
        },
    }
    case_id, typed = approve_submission(view)
    assert len(case_id) <= 40
    assert typed_number(typed) is None
    assert approve_submission({"private_metadata": 7, "state": {"values": []}}) == ("", "")


def test_a_big_case_has_no_confirm_dialog_and_a_small_one_keeps_it() -> None:
    def approve_el(n: int, above: int | None) -> dict[str, object]:
        block = decision_buttons(case(State.PENDING, lock_count=n), False, above)
        return dict(block["elements"][0])

    assert "confirm" not in approve_el(1001, 1000)
    assert "confirm" in approve_el(1000, 1000)
    assert "confirm" in approve_el(10**6, None)
    assert needs_typed_count(case(State.PENDING, lock_count=4), 3)
    assert not needs_typed_count(case(State.PENDING, lock_count=3), 3)
