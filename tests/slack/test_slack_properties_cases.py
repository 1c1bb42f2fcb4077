"""Properties of the case, cases, status and alert messages and of the reject modal.

Cases in every state, with hostile keys, deciders (a Slack id or a CLI `--by` name), reject
reasons, outcome details, approvals and verification sentences: Slack accepts every message, only
the builder's own dates and the deciders' mentions are markup, and each lock shown reads back to
its exact key. The findings messages: `test_slack_properties.py`.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.cases.case import Case, State
from bot.engine import Status
from bot.slack.blocks.case_message import case_message, reject_modal
from bot.slack.blocks.outage_message import alert_message
from bot.slack.blocks.status import cases_message, is_open, status_message
from bot.slack.blocks.text import KEY_LIMIT, OWNER_LIMIT, code
from tests.block_kit import check_message, check_view
from tests.slack_props import (
    CANARY,
    ENDPOINTS,
    HOUR,
    NOW,
    all_text,
    assert_inert,
    assert_shows,
    case_ids,
    cases,
    deciders,
    entries,
    mentions,
    owner_bytes,
    redis_text,
    section_texts,
)

SOME = settings(max_examples=80, deadline=None)

approvals = st.lists(st.tuples(deciders.filter(bool), st.integers(NOW - HOUR, NOW)), max_size=3)
#: What verification found: the caller's sentence, which may carry an error's text.
verifications = st.none() | redis_text(canary=False)
now_times = st.integers(NOW - 2 * HOUR, NOW + 3 * 24 * HOUR)


def _allowed(case: Case, approved: list[tuple[str, int]]) -> set[str]:
    return mentions([case.decided_by, *(u for u, _ in approved)])


@SOME
@given(
    case=cases(),
    now_ms=now_times,
    dry_run=st.booleans(),
    approved=approvals,
    required=st.integers(1, 3),
    verification=verifications,
    endpoint=st.sampled_from(ENDPOINTS),
)
def test_case_message_fits_is_inert_and_shows_its_keys(
    case: Case,
    now_ms: int,
    dry_run: bool,
    approved: list[tuple[str, int]],
    required: int,
    verification: str | None,
    endpoint: str,
) -> None:
    msg = case_message(
        case,
        endpoint=endpoint,
        now_ms=now_ms,
        dry_run=dry_run,
        approvals=approved,
        required_approvals=required,
        verification=verification,
    )
    check_message(msg)
    assert_inert([msg], _allowed(case, approved))
    # the locks it carries, in order, each readable back; the rest counted
    listed = entries([msg])
    assert [n for n, _, _ in listed] == list(range(1, len(listed) + 1))
    assert len(listed) <= len(case.locks)
    for (_, key, _), lock in zip(listed, case.locks, strict=False):
        assert_shows(key, lock.key, KEY_LIMIT)
    total = case.lock_count or len(case.locks)
    if total > len(listed):
        more = total - len(listed)
        locks = "lock" if more == 1 else "locks"
        assert f"…and {more:,} more {locks} in this case" in all_text([msg])
    # only a case still waiting (and not past its expiry) has buttons: carrying its id alone
    values = [el["value"] for b in msg["blocks"] if b["type"] == "actions" for el in b["elements"]]
    waiting = case.effective_state(now_ms) is State.PENDING
    assert values == ([case.id, case.id] if waiting else [])


@st.composite
def case_lists(draw: st.DrawFn, most: int = 300) -> list[Case]:
    """Up to 10 drawn cases (few locks each), now and then copied out to `most`, ids unique."""
    base = draw(st.lists(cases(locks=()), max_size=10))
    n = draw(st.one_of(st.integers(0, 10), st.integers(0, most))) if base else 0
    return [replace(base[i % len(base)], id=f"LG-270115-{i:06x}") for i in range(max(n, len(base)))]


def _shown(msg: dict[str, Any], items: list[Case]) -> list[Case]:
    """The cases whose line the message shows."""
    text = "\n".join(section_texts([msg]))
    return [c for c in items if re.search(rf"(?m)^{re.escape(code(c.id))} · \*", text)]


@SOME
@given(items=case_lists(), now_ms=now_times)
def test_cases_message_fits_is_inert_and_counts_the_rest(items: list[Case], now_ms: int) -> None:
    msg = cases_message(items, now_ms=now_ms)
    check_message(msg)
    assert_inert([msg], mentions(c.decided_by for c in items))
    shown = _shown(msg, items)
    assert shown == items[: len(shown)]
    if len(shown) < len(items):
        assert f"…and {len(items) - len(shown):,} more" in all_text([msg])


last_scans = st.none() | st.fixed_dictionaries(
    {
        "server_time_ms": st.sampled_from([0, NOW - 60_000]),
        "scanned": st.integers(0, 10**9),
        "finding_count": st.integers(0, 10**9),
        "oldest_held_seconds": st.floats(0, 1e9),
    }
)


@SOME
@given(
    items=case_lists(),
    now_ms=now_times,
    last=last_scans,
    alive=st.booleans(),
    version=st.one_of(st.sampled_from(["7.4.1", "?"]), redis_text()),
    endpoint=st.sampled_from(ENDPOINTS),
)
def test_status_message_fits_is_inert_and_counts_open_cases(
    items: list[Case],
    now_ms: int,
    last: dict[str, object] | None,
    alive: bool,
    version: str,
    endpoint: str,
) -> None:
    # the Redis version is what the server's INFO says: Redis content like any other
    status = Status(
        endpoint=endpoint,
        redis_version=version,
        server_time_ms=now_ms,
        last_scan=last,
        heartbeat_alive=alive,
    )
    msg = status_message(status, items, now_ms=now_ms)
    check_message(msg)
    assert_inert([msg], mentions(c.decided_by for c in items))
    redis_field = msg["blocks"][1]["fields"][0]["text"]
    shown_version = re.search(r"\(version (`[^`\n]*`|_\(empty\)_)\)$", redis_field)
    assert shown_version is not None, redis_field
    assert_shows(shown_version.group(1), owner_bytes(version), OWNER_LIMIT)
    live = [c for c in items if is_open(c, now_ms)]  # a dry-run approval is not open
    shown = _shown(msg, live)
    assert shown == live[: len(shown)]
    assert (f"*Open cases*: {len(live):,}" if live else "*Open cases*: none") in all_text([msg])
    if len(shown) < len(live):
        assert f"…and {len(live) - len(shown):,} more" in all_text([msg])


TITLES = [
    "the schedule scan failed",
    "the slash scan failed",
    "a release was not verified",
    "resolved",
]


@SOME
@given(title=redis_text(), detail=redis_text(), endpoint=st.sampled_from(ENDPOINTS))
def test_alert_message_fits_whatever_its_title_and_detail(
    title: str, detail: str, endpoint: str
) -> None:
    check_message(alert_message(title, detail, endpoint=endpoint))


@SOME
@given(title=st.sampled_from(TITLES), detail=redis_text(), endpoint=st.sampled_from(ENDPOINTS))
def test_alert_detail_is_inert_and_kept_out_of_the_notification(
    title: str, detail: str, endpoint: str
) -> None:
    """The detail carries an error's text (which may quote Redis): escaped, never markup; the
    notification (`text`) and the header say only the title."""
    msg = alert_message(title, detail, endpoint=endpoint)
    # `detail` is words, not code: CANARY may show (escaped), so `assert_inert` gets a copy
    # without it
    inert = alert_message(title, detail.replace(CANARY, "c"), endpoint=endpoint)
    assert_inert([inert])
    assert msg["text"] == f"lockguard: {title} ({endpoint})"
    assert msg["blocks"][0]["text"]["text"] == f"lockguard: {title}"


@SOME
@given(case_id=case_ids | redis_text(canary=False).map(lambda s: s[:200]))
def test_reject_modal_fits_and_is_inert(case_id: str) -> None:
    view = reject_modal(case_id)
    check_view(view)
    # the case id rides in private_metadata as is (it comes back on submission)
    assert view["private_metadata"] == case_id
    assert_inert([{"text": "modal", "blocks": view["blocks"]}])
