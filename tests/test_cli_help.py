"""`lockguard --help` and each command's: every command says what it does, every argument has a
help line, `serve --help` names the settings it needs (each a real setting), and a case id is
taken as typed in any case."""

from __future__ import annotations

import argparse
import io
import re
from contextlib import redirect_stdout

import pytest

from bot.cases.case import check_case_id
from bot.cli import build_parser, main
from bot.config import ALIASES, known_variables


def commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def help_of(*argv: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([*argv, "--help"]) == 0
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_command_says_what_it_does_and_every_argument_has_help(name: str) -> None:
    parser = commands()[name]
    assert parser.description, name
    for action in parser._actions:
        assert action.help, f"{name} {action.option_strings or action.dest}: no help"
    assert parser.description.split("\n")[0] in help_of(name).replace("\n", " ") or (
        parser.description[:40] in help_of(name)
    )


def test_serve_help_names_the_settings_it_needs_and_each_is_real() -> None:
    text = help_of("serve")
    for needed in (
        "SLACK_BOT_TOKEN",
        "SLACK_SIGNING_SECRET",
        "SLACK_APP_TOKEN",
        "LOCKGUARD_SLACK_CHANNEL",
        "LOCKGUARD_APPROVERS",
        "LOCKGUARD_APPROVER_GROUP",
        "REDIS_URL",
    ):
        assert needed in text
    known = {*known_variables(), *ALIASES}
    named = set(re.findall(r"\b(?:LOCKGUARD|SLACK|REDIS)_[A-Z_]+\b|\bPORT\b", text))
    assert named - known == set()


@pytest.mark.parametrize(
    "typed", ["LG-261207-f6e01a", "lg-261207-f6e01a", "LG-261207-F6E01A", " Lg-261207-F6e01A "]
)
def test_a_case_id_is_taken_in_any_case(typed: str) -> None:
    assert check_case_id(typed) == "LG-261207-f6e01a"
    args = build_parser().parse_args(["approve", typed, "--by", "ann"])
    assert args.case_id == "LG-261207-f6e01a"


def test_a_malformed_case_id_is_exit_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cases", "LG-2612-zz"]) == 2
    assert "malformed case id 'LG-2612-zz'" in capsys.readouterr().err
