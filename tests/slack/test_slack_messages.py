"""The small Slack messages (status, cases, help, alerts), ephemeral refusals, the reject modal."""

from __future__ import annotations

from typing import Any

from bot.cases.case import Case, CaseLock, State
from bot.cases.decision import MAX_TEXT
from bot.core.model import Layout, Reason
from bot.engine import Status
from bot.slack.blocks import ids
from bot.slack.blocks.case_message import (
    REASON_MAX,
    already_decided_text,
    approvers_note,
    not_approver_text,
    reject_errors,
    reject_modal,
    reject_submission,
    same_approver_text,
)
from bot.slack.blocks.outage_message import alert_message
from bot.slack.blocks.status import cases_message, help_message, status_message
from bot.slack.blocks.text import refusal_text
from tests.block_kit import check_message, check_view

NOW = 1_800_000_000_000
HOUR = 3_600_000


def texts(node: Any) -> str:
    if isinstance(node, dict):
        return "\n".join(
            v if k == "text" and isinstance(v, str) else texts(v) for k, v in node.items()
        )
    if isinstance(node, list):
        return "\n".join(texts(v) for v in node)
    return ""


def case(n: int, state: State = State.PENDING, **kw: Any) -> Case:
    lk = CaseLock(
        key=b"lock:a",
        layout=Layout.STRING,
        identity=b"t",
        reason=Reason.STALE_LEASE,
        ttl_ms=-1,
        observed_ms=NOW,
        held_seconds=10.0,
    )
    return Case(
        **{
            "id": f"LG-270115-{n:06x}",
            "state": state,
            "created_ms": NOW - n * 1000,
            "expires_ms": NOW + HOUR,
            "locks": (lk,),
            "lock_count": 3,
            **kw,
        }
    )


def status(last: dict[str, Any] | None = None, alive: bool = True) -> Status:
    return Status(
        endpoint="redis.internal:6379",
        redis_version="7.4.1",
        server_time_ms=NOW,
        last_scan=last,
        heartbeat_alive=alive,
    )


def test_status_shows_redis_last_scan_heartbeat_and_open_cases() -> None:
    last = {
        "scanned": 12_345,
        "finding_count": 3,
        "oldest_held_seconds": 7_260.0,
        "server_time_ms": NOW - 60_000,
    }
    cases = [case(1), case(2, State.REJECTED, decided_by="U0ANN"), case(3, State.INCOMPLETE)]
    msg = status_message(status(last), cases, now_ms=NOW)
    check_message(msg)
    text = texts(msg)
    assert "`redis.internal:6379` (version `7.4.1`)" in text
    assert "12,345 keys, 3 flagged, oldest held 2h01m" in text
    assert "a scan completed in the last 15m00s" in text
    assert "*Open cases*: 2" in text
    assert "`LG-270115-000001` · *Waiting for a decision* · 3 locks" in text
    assert "LG-270115-000002" not in text  # rejected: closed


def test_status_before_any_scan_and_with_many_open_cases() -> None:
    msg = status_message(status(None, alive=False), [case(i) for i in range(500)], now_ms=NOW)
    check_message(msg)
    text = texts(msg)
    assert "none recorded yet" in text
    assert "no scan completed in the last 15m00s" in text
    assert "more: `/lockguard cases`" in text


def test_cases_message_lists_states_deciders_and_outcomes() -> None:
    cases = [
        case(
            1,
            State.RELEASED,
            decided_by="U0ANN",
            decided_ms=NOW,
            outcome_counts={"released": 2, "already_gone": 1},
        ),
        case(
            2,
            State.REJECTED,
            decided_by="bob",
            decided_ms=NOW,
            decision_reason="<!channel> not now",
        ),
        case(3, State.PENDING, expires_ms=NOW - 1),
    ]
    msg = cases_message(cases, now_ms=NOW)
    check_message(msg)
    text = texts(msg)
    assert "*Released*" in text
    assert "decided by <@U0ANN>" in text
    assert "2 released" in text
    assert "1 already gone" in text
    assert "decided by `bob`" in text
    assert "&lt;!channel&gt; not now" in text
    assert "*Expired*" in text
    assert "<!channel>" not in text


def test_cases_message_empty_and_huge() -> None:
    check_message(cases_message([], now_ms=NOW))
    assert "No cases" in texts(cases_message([], now_ms=NOW))
    msg = cases_message([case(i, decision_reason="<" * 500) for i in range(1000)], now_ms=NOW)
    check_message(msg)
    assert "more: `lockguard cases --json`" in texts(msg)


def test_help_lists_every_command() -> None:
    msg = help_message()
    check_message(msg)
    text = texts(msg)
    for command in (
        "`/lockguard scan [pattern]`",
        "`/lockguard status`",
        "`/lockguard cases`",
        "`/lockguard help`",
    ):
        assert command in text


def test_alert_escapes_its_detail() -> None:
    msg = alert_message(
        "Redis unreachable",
        "connection refused <!here> " + "x" * 5000,
        endpoint="redis.internal:6379",
    )
    check_message(msg)
    text = texts(msg)
    assert "lockguard: Redis unreachable" in text
    assert "&lt;!here&gt;" in text
    assert "<!here>" not in text
    assert msg["text"] == "lockguard: Redis unreachable (redis.internal:6379)"


def test_approvers_note() -> None:
    assert approvers_note() == "Any member of this channel may decide."
    assert approvers_note(required=2) == (
        "Any member of this channel may decide. Two different approvers are needed."
    )
    assert approvers_note(["U0ANN", "U0BOB"], "S0OPS") == (
        "Approvers: <@U0ANN>, <@U0BOB>, <!subteam^S0OPS>."
    )
    assert approvers_note(["U0ANN"], notify=False) == "Approvers: `U0ANN`."
    assert approvers_note(["<!channel>"]) == "Approvers: `&lt;!channel&gt;`."


def test_refusals() -> None:
    assert not_approver_text().startswith("You are not an approver for lockguard")
    decided = case(1, State.REJECTED, decided_by="U0ANN", decided_ms=NOW)
    text = already_decided_text(decided, now_ms=NOW)
    assert text.startswith("Case `LG-270115-000001` was already decided by <@U0ANN> at <!date^")
    assert text.endswith(": rejected.")
    assert "expired" in already_decided_text(case(1, expires_ms=NOW), now_ms=NOW)
    assert "someone else" in same_approver_text("LG-270115-000001")
    assert refusal_text("bad <@U1>") == "Not done: bad &lt;@U1&gt;"


def test_reject_modal_fits_and_round_trips() -> None:
    view = reject_modal("LG-270115-abcdef")
    check_view(view)
    assert view["type"] == "modal"
    assert view["callback_id"] == ids.REJECT_MODAL == "lockguard_reject_modal"
    assert view["private_metadata"] == "LG-270115-abcdef"
    assert view["submit"]["text"] == "Reject"
    assert view["close"]["text"] == "Cancel"
    block = next(b for b in view["blocks"] if b["type"] == "input")
    assert block["block_id"] == ids.REJECT_REASON_BLOCK
    assert block["optional"] is False
    element = block["element"]
    assert element["type"] == "plain_text_input"
    assert element["action_id"] == ids.REJECT_REASON_ACTION
    assert element["max_length"] == REASON_MAX == MAX_TEXT
    submitted = {
        **view,
        "state": {
            "values": {
                ids.REJECT_REASON_BLOCK: {
                    ids.REJECT_REASON_ACTION: {
                        "type": "plain_text_input",
                        "value": "  still running  ",
                    }
                }
            }
        },
    }
    assert reject_submission(submitted) == ("LG-270115-abcdef", "still running")
    assert reject_submission({}) == ("", "")
    assert reject_errors("a reason is needed") == {
        "response_action": "errors",
        "errors": {ids.REJECT_REASON_BLOCK: "a reason is needed"},
    }


def test_an_alert_title_carrying_markup_pings_no_one_in_the_notification() -> None:
    msg = alert_message(
        "watch lock:<!channel> is overdue", "no update for 2h", endpoint="redis://r:6379/0"
    )
    assert "<!channel>" not in msg["text"]
    assert "&lt;!channel&gt;" in msg["text"]
