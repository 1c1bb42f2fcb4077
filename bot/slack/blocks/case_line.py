"""One case in a line (two or three when it has a reason, outcomes or a hint): the one builder
behind `/lockguard status`, `/lockguard cases`, the digest and the Home tab.

    `LG-270115-aaaaaa` · *Released* · 3 locks · opened <date> · decided by <@U0ANN> at <date>
          2 released · 1 already gone

What differs between them is a choice, not a copy: `notify=False` (the digest, posted to a
whole channel every day) shows deciders as code instead of mentions, so it pings nobody;
`live=True` (the Home tab, a view of what still needs doing) adds the time left before a
pending case expires, who approved it so far, names the decider as its approver, and says how
to resume an incomplete release. Case ids, names and reasons are made inert like any Redis
content (`bot.slack.blocks.text`).
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.cases.case import Case, State
from bot.core.display import duration
from bot.slack.blocks.case_message import state_word
from bot.slack.blocks.text import (
    OUTCOME_WORDS,
    OWNER_LIMIT,
    code,
    count,
    cut,
    date,
    in_order,
    mention,
    outcome_words,
    plain,
    redis_text,
)
from bot.slack.blocks.text import word as shown_word

#: A reject reason is shown up to this many characters.
REASON_LIMIT = 300


def case_state(case: Case, now_ms: int) -> str:
    """The case's state in words; a pending case with an approval waits for one more."""
    approvals = list(case.approvals)
    return state_word(case, now_ms, approvals, len(approvals) + 1 if approvals else 1)


def outcomes_text(counts: Mapping[str, int]) -> str:
    """`2 released · 1 already gone`: the outcomes in their usual order, in words."""
    names = in_order(counts, OUTCOME_WORDS)
    return " · ".join(
        f"{counts[k]:,} {shown_word(outcome_words(k), 60)}" for k in names[:8] if counts[k]
    )


def case_line(case: Case, now_ms: int, *, notify: bool = True, live: bool = False) -> str:
    """The case's id, state, size and times, who decided and why, what became of its locks."""
    state = case.effective_state(now_ms)
    person = mention if notify else (lambda who: redis_text(who, OWNER_LIMIT))
    case_id = cut(case.id, 40)
    line = (
        f"{code(case_id)} · *{case_state(case, now_ms)}* · "
        f"{count(case.total_locks, 'lock')} · opened {date(case.created_ms)}"
    )
    if state is State.PENDING:
        line += f" · expires {date(case.expires_ms)}"
        if live:
            line += f" (in {duration(max(case.expires_ms - now_ms, 0) / 1000)})"
            if case.approvals:
                line += " · approved so far by " + ", ".join(
                    person(who) for who, _ in case.approvals[:5]
                )
    if case.decided_by and not (live and state is State.PENDING):
        line += f" · {'approved' if live else 'decided'} by {person(case.decided_by)}"
        if case.decided_ms:
            line += f" at {date(case.decided_ms)}"
    if case.decision_reason:
        line += f"\n      “{plain(case.decision_reason, REASON_LIMIT)}”"
    if case.outcome_counts:
        line += "\n      " + outcomes_text(case.outcome_counts)
    if live and state is State.INCOMPLETE:
        line += (
            f"\n      {code(f'lockguard approve {case_id} --by NAME --resume')} "
            "retries the locks that errored"
        )
    return line
