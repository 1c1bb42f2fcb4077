"""Properties of the findings and healthy messages, over anything Redis may hold.

For any key and identity bytes, owner text and number of findings (0 to thousands), what the
channel sees: every message Slack accepts, nothing from Redis pings, links or formats, and every
flagged lock is listed (in the message or its thread) with its key readable back to the exact
bytes. The case, cases, status, alert and modal builders: `test_slack_properties_cases.py`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.cases.case import Case, CaseLock, State
from bot.core.model import Finding, Layout, Reason
from bot.scan.result import ScanResult
from bot.slack.blocks import ids
from bot.slack.blocks.case_message import approvers_note
from bot.slack.blocks.findings import MAX_SHOWN, FindingsPost, findings_message, healthy_message
from bot.slack.blocks.text import KEY_LIMIT, OWNER_LIMIT, is_group_id
from tests.block_kit import check_message
from tests.slack_props import (
    CANARY,
    ENDPOINTS,
    HOUR,
    NOW,
    all_text,
    assert_inert,
    assert_shows,
    cases,
    entries,
    flagged,
    group_ids,
    mentions,
    one_line,
    owner_bytes,
    redis_text,
    scan_results,
    tokens,
    user_ids,
)

#: The findings builders are fast, but a drawn scan may hold 3,000 findings.
FAST = settings(max_examples=40, deadline=None)


@dataclass(frozen=True)
class Drawn:
    result: ScanResult
    case: Case | None
    #: The other arguments of `build`: approvers, dry run, auto-remediation, endpoint.
    kw: dict[str, Any]
    post: FindingsPost

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [self.post.message, *self.post.replies]

    @property
    def allowed(self) -> set[str]:
        """The mentions the builder itself writes: the configured approvers'."""
        if not self.kw["notify"]:
            return set()
        group = self.kw["group"]
        return mentions(self.kw["users"]) | (
            {f"<!subteam^{group}>"} if is_group_id(group) else set()
        )


def build(
    result: ScanResult,
    case: Case | None,
    *,
    users: list[str],
    group: str,
    required: int,
    notify: bool,
    dry_run: bool,
    auto_remediate: bool,
    endpoint: str,
) -> FindingsPost:
    return findings_message(
        result,
        case,
        endpoint=endpoint,
        dry_run=dry_run,
        auto_remediate=auto_remediate,
        approvers_note=approvers_note(users, group, required, notify=notify),
    )


@st.composite
def drawn(draw: st.DrawFn) -> Drawn:
    result = draw(scan_results())
    offered = tuple(CaseLock.from_finding(f) for f in flagged(result) if f.releasable)
    case = draw(st.none() | cases(locks=offered[:50]))
    # configured approvers: Slack ids, or whatever text was configured (never Redis content)
    users = draw(st.lists(user_ids | one_line(redis_text(3, canary=False)), max_size=10))
    group = draw(st.just("") | group_ids | one_line(redis_text(3, canary=False)))
    kw: dict[str, Any] = {
        "users": users,
        "group": group,
        "required": draw(st.integers(1, 3)),
        "notify": draw(st.booleans()),
        "dry_run": draw(st.booleans()),
        "auto_remediate": draw(st.booleans()),
        "endpoint": draw(st.sampled_from(ENDPOINTS)),
    }
    return Drawn(result, case, kw, build(result, case, **kw))


@FAST
@given(d=drawn())
def test_every_findings_message_and_reply_fits_slack(d: Drawn) -> None:
    for msg in d.messages:
        check_message(msg)


@FAST
@given(d=drawn())
def test_nothing_from_redis_pings_links_or_formats(d: Drawn) -> None:
    assert_inert(d.messages, d.allowed)
    # the same scan with innocent keys and owners makes exactly the same <…> tokens
    innocent = replace(
        d.result,
        worst=[
            replace(f, key=b"lock:%d" % i, owner="web-1" if f.owner else "", identity=b"tok")
            for i, f in enumerate(d.result.worst)
        ],
    )
    again = build(innocent, d.case, **d.kw)
    assert tokens(d.messages) == tokens([again.message, *again.replies])


@FAST
@given(d=drawn())
def test_every_flagged_key_is_listed_once_in_order_and_reads_back(d: Drawn) -> None:
    want = flagged(d.result)
    listed = entries(d.messages)
    if d.post.attach:  # a pending case's whole list goes in its thread as a file instead
        assert d.case is not None
        assert d.post.replies == []
        want = want[: len(listed)]
        assert f"`lockguard-{d.case.id}.csv` in this message's thread" in all_text([d.post.message])
    assert [n for n, _, _ in listed] == list(range(1, len(want) + 1))
    for (_, key, rest), f in zip(listed, want, strict=True):
        assert_shows(key, f.key, KEY_LIMIT)
        owner = re.search(r"owner (`[^`\n]*`|unknown)", rest)
        assert owner is not None, rest
        if f.owner:
            assert_shows(owner.group(1), owner_bytes(f.owner), OWNER_LIMIT)
        else:
            assert owner.group(1) == "unknown"
    in_channel = len(entries([d.post.message]))
    assert in_channel <= MAX_SHOWN
    assert bool(d.post.replies) == (in_channel < len(want) and not d.post.attach)
    if d.post.replies:
        more = len(want) - in_channel
        locks = "lock" if more == 1 else "locks"
        assert f"…and {more:,} more flagged {locks}: listed in the thread." in all_text(
            [d.post.message]
        )
    # buttons (a pending case's only) carry nothing but the case id
    values = [
        el["value"]
        for b in d.post.message["blocks"]
        if b["type"] == "actions"
        for el in b["elements"]
    ]
    pending = d.case is not None and d.case.state is State.PENDING
    assert values == ([d.case.id, d.case.id] if pending and d.case else [])
    assert all(b["type"] != "actions" for r in d.post.replies for b in r["blocks"])


@settings(max_examples=60, deadline=None)
@given(result=scan_results(), endpoint=st.sampled_from(ENDPOINTS))
def test_healthy_message_fits_and_is_inert(result: ScanResult, endpoint: str) -> None:
    msg = healthy_message(result, endpoint=endpoint)
    check_message(msg)
    assert_inert([msg])
    assert all(b["type"] != "actions" for b in msg["blocks"])


# -- explicit worst cases: 5,000 findings ------------------------------------------------------


def _finding(i: int, key: bytes, owner: str, reason: Reason) -> Finding:
    return Finding(
        key=key + b"#%d" % i,
        type="string",
        layout=Layout.COUNTER,
        reason=reason,
        identity=key,
        owner=owner,
        ttl_ms=-1,
        held_seconds=9e8 - i,
        idle_seconds=10**7,
        observations=1,
        rearms=0,
        counter=10**15,
        observed_ms=NOW,
        releasable=False,
        note="a hash whose fields are not a lock holder's (Redisson: <uuid>:<thread> "
        "-> count) & " * 10,
    )


@pytest.mark.parametrize(
    ("key", "owner"),
    [
        # each shown character grows most: `&` is `&amp;` inside the code
        (b"&" * KEY_LIMIT, "&" * OWNER_LIMIT),
        (b"`" * KEY_LIMIT, "`" * OWNER_LIMIT),
        # binary bytes and invisible marks, each shown as four characters
        (b"\xff\x00" * KEY_LIMIT, "\u200f\u200b" * OWNER_LIMIT),
        (f"{CANARY}<https://evil|click>*b*_i_~s~\n> q".encode() * 10, f"{CANARY}&amp;" * 10),
        # 20 kB of mentions in every key and owner
        (b"<!channel>" * 2_000, "<@U123>" * 3_000),
    ],
    ids=["ampersands", "backticks", "binary", "markup", "mentions-20kB"],
)
def test_5000_hostile_findings_fit_and_each_is_listed(key: bytes, owner: str) -> None:
    check_findings(5_000, key, owner)


@pytest.mark.parametrize(
    ("key", "owner"),
    [
        (b"\xff\x00" * 10_000, "\u200f\u200b" * 10_000),
        (f"{CANARY}<https://evil|click>*b*_i_~s~\n> q".encode() * 500, f"{CANARY}&amp;" * 2_000),
    ],
    ids=["binary", "markup"],
)
def test_30_findings_of_20_kb_fit_and_each_is_listed(key: bytes, owner: str) -> None:
    """Fewer of them: escaping 20 kB of binary or invisible text costs milliseconds."""
    check_findings(30, key, owner)


def check_findings(n: int, key: bytes, owner: str) -> None:
    reasons = [
        Reason.STALE_LEASE,
        Reason.INFINITE_TTL,
        Reason.KEPT_ALIVE_BY_CONTENDERS,
        Reason.LONG_HELD_RENEWING,
    ]
    worst = [_finding(i, key, owner, reasons[i % 4]) for i in range(n)]
    result = ScanResult(
        scanned=10**7,
        worst=worst,
        oldest_held_seconds=9e8,
        server_time_ms=NOW,
        by_reason=Counter(dict.fromkeys(reasons, n + 10**6)),
    )
    offered = tuple(CaseLock.from_finding(replace(f, releasable=True)) for f in worst)
    case = Case(
        id="LG-270115-abcdef",
        state=State.PENDING,
        created_ms=NOW,
        expires_ms=NOW + HOUR,
        locks=offered[:50],
        lock_count=len(offered),
    )
    users = [f"U{i:010d}" for i in range(10)]
    post = build(
        result,
        case,
        users=users,
        group="S0GROUP",
        required=2,
        notify=True,
        dry_run=True,
        auto_remediate=True,
        endpoint=ENDPOINTS[0],
    )
    check_message(post.message)
    assert post.attach
    assert post.replies == []
    assert_inert([post.message], mentions(users) | {"<!subteam^S0GROUP>"})
    without_case = build(
        result,
        None,
        users=users,
        group="S0GROUP",
        required=2,
        notify=True,
        dry_run=True,
        auto_remediate=False,
        endpoint=ENDPOINTS[0],
    )
    msgs = [without_case.message, *without_case.replies]
    for msg in msgs:
        check_message(msg)
    assert_inert(msgs, mentions(users) | {"<!subteam^S0GROUP>"})
    listed = entries(msgs)
    assert [i for i, _, _ in listed] == list(range(1, n + 1))
    for (_, shown, _), f in zip(listed, worst, strict=True):
        assert_shows(shown, f.key, KEY_LIMIT)
    assert [
        el["action_id"]
        for b in post.message["blocks"]
        if b["type"] == "actions"
        for el in b["elements"]
    ] == [ids.APPROVE, ids.REJECT]
