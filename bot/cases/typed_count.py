"""The typed count: a case of more than `LOCKGUARD_CONFIRM_TYPED_ABOVE` locks is approved only
by typing its number of locks (in Slack's modal, at the CLI's prompt or `--yes-count N`), read
strictly: digits, or digits grouped by commas ("3,000").
"""

from __future__ import annotations

import re

from bot.cases.case import Case

#: The longest number taken: "1,000,000,000,000" is 17 characters.
TYPED_MAX = 20
_NUMBER = re.compile(r"[0-9]{1,3}(,[0-9]{3})+|[0-9]{1,15}")


def needs_typed_count(case: Case, typed_above: int | None) -> bool:
    return typed_above is not None and case.total_locks > typed_above


def typed_number(typed: str) -> int | None:
    """100000 from "100000" or "100,000"; None for anything else."""
    text = typed.strip()
    if len(text) > TYPED_MAX or not _NUMBER.fullmatch(text):
        return None
    return int(text.replace(",", ""))
