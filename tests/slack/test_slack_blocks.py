"""Slack findings messages: what a person in the channel sees, and that Slack accepts it."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

from bot.cases.case import Case, CaseLock, State
from bot.core.display import unescape
from bot.core.model import FINDING_REASONS, Finding, Layout, Reason
from bot.scan.result import ScanResult
from bot.slack.blocks import ids
from bot.slack.blocks.case_message import approvers_note
from bot.slack.blocks.findings import MAX_SHOWN, findings_message, healthy_message
from tests.block_kit import check_message

NOW = 1_800_000_000_000
HOUR = 3_600_000
CASE_ID = "LG-270115-abcdef"
ENDPOINT = "redis.internal:6379"
_DATE = re.compile(r"<!date\^\d+\^\{date_short_pretty\} \{time\}\|[^<>|]+>")


def finding(
    key: bytes,
    reason: Reason = Reason.STALE_LEASE,
    *,
    owner: str = "web-1",
    held: float = 4_000.0,
    ttl_ms: int = -1,
    layout: Layout = Layout.REDIS_PY,
    counter: int | None = None,
) -> Finding:
    return Finding(
        key=key,
        type="string",
        layout=layout,
        reason=reason,
        identity=b"tok-1",
        owner=owner,
        ttl_ms=ttl_ms,
        held_seconds=held,
        idle_seconds=5,
        observations=3,
        rearms=0,
        counter=counter,
        observed_ms=NOW,
        releasable=reason is not Reason.LONG_HELD_RENEWING,
    )


def result(
    findings: list[Finding],
    *,
    scanned: int | None = None,
    healthy: int = 0,
    flagged_total: int | None = None,
) -> ScanResult:
    by = Counter(f.reason for f in findings if f.reason in FINDING_REASONS)
    if flagged_total is not None:
        by[Reason.STALE_LEASE] += flagged_total - sum(by.values())
    by[Reason.HEALTHY] += healthy
    worst = sorted(findings, key=Finding.sort_key)
    return ScanResult(
        scanned=scanned if scanned is not None else sum(by.values()),
        by_reason=by,
        worst=worst,
        oldest_held_seconds=max((f.held_seconds for f in findings), default=0.0),
        server_time_ms=NOW,
        duration_seconds=0.4,
    )


def case_of(findings: list[Finding], state: State = State.PENDING) -> Case:
    locks = tuple(CaseLock.from_finding(f) for f in findings if f.releasable)
    return Case(
        id=CASE_ID,
        state=state,
        created_ms=NOW,
        expires_ms=NOW + HOUR,
        locks=locks[:50],
        lock_count=len(locks),
    )


def post(
    findings: list[Finding], *, dry_run: bool = False, with_case: bool = True, **kw: Any
) -> Any:
    res = result(findings, **kw)
    return findings_message(
        res,
        case_of(findings) if with_case else None,
        endpoint=ENDPOINT,
        dry_run=dry_run,
        auto_remediate=True,
        approvers_note=approvers_note(),
    )


def texts(node: Any) -> list[str]:
    """Every `text` string anywhere in a message, a block or a list of them."""
    out: list[str] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "text" and isinstance(v, str):
                out.append(v)
            else:
                out += texts(v)
    elif isinstance(node, list):
        for v in node:
            out += texts(v)
    return out


def all_text(node: Any) -> str:
    return "\n".join(texts(node))


def buttons(msg: dict[str, Any]) -> list[dict[str, Any]]:
    return [el for b in msg["blocks"] if b["type"] == "actions" for el in b["elements"]]


# -- dry run, buttons -------------------------------------------------------------------------


def test_dry_run_says_so_at_the_top_and_on_the_buttons() -> None:
    msg = post([finding(b"lock:a")], dry_run=True).message
    check_message(msg)
    assert "dry run" in all_text(msg["blocks"][0]).lower()
    assert "dry run" in all_text(msg["blocks"][1]).lower()
    assert msg["text"].lower().startswith("[dry run]")
    labels = [b["text"]["text"] for b in buttons(msg)]
    assert labels == ["Approve (dry run)", "Reject (dry run)"]


def test_live_message_never_mentions_dry_run() -> None:
    msg = post([finding(b"lock:a")], dry_run=False).message
    assert "dry run" not in all_text(msg).lower()
    assert [b["text"]["text"] for b in buttons(msg)] == ["Approve", "Reject"]


def test_buttons_carry_only_the_case_id_with_the_contract_action_ids() -> None:
    msg = post([finding(b"lock:a"), finding(b"lock:b", Reason.INFINITE_TTL)]).message
    approve, reject = buttons(msg)
    assert (approve["action_id"], approve["value"], approve["style"]) == (
        ids.APPROVE,
        CASE_ID,
        "primary",
    )
    assert (reject["action_id"], reject["value"], reject["style"]) == (
        ids.REJECT,
        CASE_ID,
        "danger",
    )
    assert approve["action_id"] == "lockguard_approve"
    assert reject["action_id"] == "lockguard_reject"
    assert "2 locks" in all_text(approve["confirm"])  # the confirm dialog says what it releases
    assert "confirm" not in reject  # the reject modal asks instead


@pytest.mark.parametrize(
    "state", [State.REJECTED, State.EXPIRED, State.RELEASED, State.APPROVED, State.OPENING]
)
def test_no_buttons_unless_the_case_is_pending(state: State) -> None:
    fs = [finding(b"lock:a")]
    msg = findings_message(
        result(fs),
        case_of(fs, state),
        endpoint=ENDPOINT,
        dry_run=False,
        auto_remediate=True,
        approvers_note="",
    ).message
    check_message(msg)
    assert buttons(msg) == []


def test_no_case_no_buttons_and_says_why() -> None:
    fs = [finding(b"lock:a")]
    msg = findings_message(
        result(fs), None, endpoint=ENDPOINT, dry_run=False, auto_remediate=False, approvers_note=""
    ).message
    check_message(msg)
    assert buttons(msg) == []
    text = all_text(msg)
    assert "No case opened" in text
    assert "LOCKGUARD_AUTO_REMEDIATE" in text
    assert "Auto-remediation off" in text


def test_message_says_what_approving_releases_and_who_may_decide() -> None:
    fs = [finding(b"lock:a"), finding(b"lock:b"), finding(b"lock:c", Reason.LONG_HELD_RENEWING)]
    msg = post(fs).message
    text = all_text(msg)
    assert "approving releases *2 locks*" in text
    assert "Any member of this channel may decide." in text
    assert "Auto-remediation on" in text
    assert "1 lock still renewed by its owner (never offered)" in text


def test_each_finding_shows_key_layout_owner_age_ttl_and_reason_in_words() -> None:
    fs = [
        finding(b"lock:billing", Reason.INFINITE_TTL, owner="worker-7", held=3 * 3600 + 420),
        finding(b"lock:renew", Reason.LONG_HELD_RENEWING, ttl_ms=25_000),
        finding(
            b"\x17ctr", Reason.KEPT_ALIVE_BY_CONTENDERS, layout=Layout.COUNTER, counter=41, owner=""
        ),
    ]
    msg = post(fs).message
    check_message(msg)
    text = all_text(msg)
    assert "`lock:billing`" in text
    assert "*no expiry*: nobody will ever release it" in text
    assert "no expiry: no expiry" not in text  # the label is not said twice
    assert "owner `worker-7` · held 3h07m · TTL none" in text
    assert "held long, but its owner keeps renewing it (looks alive; not offered)" in text
    assert "TTL 25s" in text
    assert "abandoned, but failed contenders keep resetting its TTL" in text
    assert "counter (n=41) · owner unknown" in text
    assert f"`{ENDPOINT}`" in text
    # worst first: the contenders' counter before the no-expiry lock before the renewing one
    assert text.index("\\x17ctr") < text.index("lock:billing") < text.index("lock:renew")


def test_fallback_text_has_no_redis_content() -> None:
    msg = post([finding(b"lock:<!channel>")]).message
    assert "channel" not in msg["text"]
    assert CASE_ID in msg["text"]


# -- inert rendering of what Redis holds -------------------------------------------------------


HOSTILE = [
    b"lock:<!channel>",
    b"lock:*x*",
    b"\x00\xff<@U1>",
    b"lock:<https://evil|click>",
    b"lock:`code` _i_ ~s~ @here &amp;",
    b" lock:edge ",
]


def test_keys_from_redis_ping_nobody_and_format_nothing() -> None:
    fs = [finding(k, owner="<!here> *boss*") for k in HOSTILE]
    msg = post(fs).message
    check_message(msg)
    for text in texts(msg):
        bare = _DATE.sub("", text)
        assert "<!" not in bare
        assert "<@" not in bare
        assert "<http" not in bare
    text = all_text(msg)
    assert "`lock:&lt;!channel&gt;`" in text
    assert "`lock:*x*`" in text  # inside code: no bold
    assert "`\\x00\\xff&lt;@U1&gt;`" in text  # binary shown escaped, as hex
    assert "`lock:\\x60code\\x60 _i_ ~s~ @here &amp;amp;`" in text
    assert "`\\x20lock:edge\\x20`" in text
    assert "owner `&lt;!here&gt; *boss*`" in text


def test_every_mrkdwn_text_is_verbatim() -> None:
    msg = post([finding(k) for k in HOSTILE]).message

    def mrkdwn_objects(node: Any) -> list[dict[str, Any]]:
        if isinstance(node, dict):
            found = [node] if node.get("type") == "mrkdwn" else []
            return found + [o for v in node.values() for o in mrkdwn_objects(v)]
        if isinstance(node, list):
            return [o for v in node for o in mrkdwn_objects(v)]
        return []

    objects = mrkdwn_objects(msg["blocks"])
    assert objects
    assert all(o["verbatim"] is True for o in objects)


def test_shown_key_round_trips_to_the_exact_bytes() -> None:
    key = b"lock:`tick`\x00\xfe"
    text = all_text(post([finding(key)]).message)
    shown = re.search(r"1\. `([^`]*)`", text)
    assert shown is not None
    assert unescape(shown.group(1)) == key


def test_a_10_kb_key_is_truncated_with_a_note() -> None:
    key = b"lock:" + b"<" * 10_000
    msg = post([finding(key)]).message
    check_message(msg)
    line = next(t for t in texts(msg) if "1. `" in t)
    assert len(line) < 1000
    assert "(+9885 chars)" in line
    assert "<" not in _DATE.sub("", line)


# -- many findings ----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 30, 5_000])
def test_any_number_of_findings_fits_and_every_key_is_shown_somewhere(n: int) -> None:
    """Without a case (auto-remediation off), the flagged locks the message cannot show are
    listed in thread replies."""
    reasons = [
        Reason.STALE_LEASE,
        Reason.INFINITE_TTL,
        Reason.KEPT_ALIVE_BY_CONTENDERS,
        Reason.LONG_HELD_RENEWING,
    ]
    fs = [
        finding(f"lock:svc-{i:05d}:<job>".encode(), reasons[i % 4], held=100_000 - i)
        for i in range(n)
    ]
    p = post(fs, healthy=10, with_case=False)
    check_message(p.message)
    assert not p.attach
    for reply in p.replies:
        check_message(reply)
    everything = all_text(p.message) + "\n".join(all_text(r) for r in p.replies)
    for i in range(n):
        assert f"`lock:svc-{i:05d}:&lt;job&gt;`" in everything
    assert all_text(p.message).count("`lock:svc-") == min(n, MAX_SHOWN)
    if n > MAX_SHOWN:
        assert f"…and {n - MAX_SHOWN:,} more flagged locks: listed in the thread." in all_text(
            p.message
        )
    else:
        assert p.replies == []


@pytest.mark.parametrize("n", [30, 5_000])
def test_a_case_of_more_locks_than_shown_gets_its_whole_list_attached_not_replies(n: int) -> None:
    fs = [finding(f"lock:svc-{i:05d}".encode(), held=100_000 - i) for i in range(n)]
    p = post(fs)
    check_message(p.message)
    assert p.attach
    assert p.replies == []
    text = all_text(p.message)
    assert text.count("`lock:svc-") == MAX_SHOWN
    assert f"The worst {MAX_SHOWN} shown here. Every one of the case's {n:,} locks" in text
    assert f"`lockguard-{CASE_ID}.csv` in this message's thread" in text
    assert len(buttons(p.message)) == 2


def test_a_case_the_message_shows_whole_attaches_nothing() -> None:
    p = post([finding(f"lock:{i}".encode()) for i in range(3)])
    assert not p.attach
    assert p.replies == []
    assert ".csv" not in all_text(p.message)


def test_5000_worst_case_keys_still_fit_every_message() -> None:
    """Keys at the display limit, made of characters that grow most when escaped."""
    fs = [finding(b"<&>" * 60 + str(i).encode(), owner="&" * 200) for i in range(5_000)]
    p = post(fs, dry_run=True, with_case=False)
    check_message(p.message)
    assert p.replies
    for reply in p.replies:
        check_message(reply)
    lines = sum(all_text(m).count("\n") + 1 for m in [p.message, *p.replies])
    assert lines >= 5_000


def test_replies_number_locks_on_from_the_channel_message() -> None:
    fs = [finding(f"lock:{i}".encode(), held=10_000 - i) for i in range(25)]
    p = post(fs, with_case=False)
    assert len(p.replies) == 1
    text = all_text(p.replies[0])
    assert "Flagged locks 21 to 25 of 25" in text
    assert "21. `lock:20`" in text
    assert "25. `lock:24`" in text
    assert "stale lease" in text


def test_findings_the_scan_did_not_keep_are_counted() -> None:
    fs = [finding(f"lock:{i}".encode()) for i in range(5)]
    msg = post(fs, flagged_total=9_005, with_case=False).message
    check_message(msg)
    text = all_text(msg)
    assert "9,000 more not listed" in text
    assert "*Locks flagged*\n9,005" in text


# -- healthy ----------------------------------------------------------------------------------


def test_healthy_message_counts_and_ages() -> None:
    res = ScanResult(
        scanned=42,
        by_reason=Counter({Reason.HEALTHY: 40, Reason.NOT_A_LOCK: 2}),
        oldest_held_seconds=125.0,
        duration_seconds=0.2,
    )
    msg = healthy_message(res, endpoint=ENDPOINT)
    check_message(msg)
    text = all_text(msg)
    assert "all healthy" in msg["text"]
    assert "40 locks, all healthy; oldest held 2m05s." in text
    assert "2 keys under the patterns are not locks" in text
    assert buttons(msg) == []


def test_healthy_message_with_nothing_scanned() -> None:
    msg = healthy_message(ScanResult(), endpoint=ENDPOINT)
    check_message(msg)
    assert "No keys match the lock patterns." in all_text(msg)
