"""The message of a case after a decision, rebuilt from the case alone, for each state."""

from __future__ import annotations

import re
from typing import Any

import pytest

from bot.cases.case import Case, CaseLock, State
from bot.core.model import Layout, Reason
from bot.slack.blocks import ids
from bot.slack.blocks.case_message import case_message, state_word
from tests.block_kit import check_message

NOW = 1_800_000_000_000
HOUR = 3_600_000
CASE_ID = "LG-270115-0a1b2c"
ENDPOINT = "redis.internal:6379"
_DATE = re.compile(r"<!date\^\d+\^\{date_short_pretty\} \{time\}\|[^<>|]+>")


def lock(key: bytes, reason: Reason = Reason.STALE_LEASE) -> CaseLock:
    return CaseLock(
        key=key,
        layout=Layout.REDIS_PY,
        identity=b"tok",
        reason=reason,
        ttl_ms=-1,
        observed_ms=NOW,
        held_seconds=5_000.0,
        owner="web-1",
    )


def outcome(lk: CaseLock, name: str, detail: str = "", published: bool = False) -> dict[str, Any]:
    return {
        "key": "",
        "key_hex": lk.key.hex(),
        "outcome": name,
        "detail": detail,
        "wake": [],
        "event_published": published,
    }


def case(state: State, locks: tuple[CaseLock, ...] = (), **kw: Any) -> Case:
    locks = locks or (lock(b"lock:a"), lock(b"lock:b"), lock(b"lock:c"))
    return Case(
        **{
            "id": CASE_ID,
            "state": state,
            "created_ms": NOW,
            "expires_ms": NOW + HOUR,
            "locks": locks,
            "lock_count": len(locks),
            **kw,
        }
    )


def render(
    c: Case, *, now_ms: int = NOW + 60_000, dry_run: bool = False, **kw: Any
) -> dict[str, Any]:
    msg = case_message(c, endpoint=ENDPOINT, now_ms=now_ms, dry_run=dry_run, **kw)
    check_message(msg)
    return msg


def texts(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "text" and isinstance(v, str)] + [
            t for k, v in node.items() if not (k == "text" and isinstance(v, str)) for t in texts(v)
        ]
    if isinstance(node, list):
        return [t for v in node for t in texts(v)]
    return []


def text_of(msg: dict[str, Any]) -> str:
    return "\n".join(texts(msg["blocks"]))


def headline(msg: dict[str, Any]) -> str:
    return str(msg["blocks"][0]["text"]["text"])


def buttons(msg: dict[str, Any]) -> list[dict[str, Any]]:
    return [el for b in msg["blocks"] if b["type"] == "actions" for el in b["elements"]]


def test_pending_case_keeps_its_buttons() -> None:
    msg = render(case(State.PENDING))
    assert headline(msg) == f"Case {CASE_ID}: Waiting for a decision"
    assert [(b["action_id"], b["value"]) for b in buttons(msg)] == [
        (ids.APPROVE, CASE_ID),
        (ids.REJECT, CASE_ID),
    ]
    assert "3 locks to decide" in text_of(msg)


def test_first_of_two_approvals_waits_for_a_second_approver() -> None:
    msg = render(case(State.PENDING), approvals=[("U0FIRST", NOW + 1000)], required_approvals=2)
    assert headline(msg) == f"Case {CASE_ID}: Waiting for a second approval"
    text = text_of(msg)
    assert "Approved by <@U0FIRST> at <!date^1800000001^" in text
    assert "waiting for a second approver" in text
    assert len(buttons(msg)) == 2


def test_released_case_shows_who_when_and_each_outcome_without_buttons() -> None:
    a, b, c, d = lock(b"lock:a"), lock(b"lock:b"), lock(b"lock:c"), lock(b"lock:d")
    outs = (
        outcome(a, "released", "deleted: the approved holder still held it", True),
        outcome(b, "skipped_reacquired", "skipped: re-acquired or changed since approval"),
        outcome(c, "already_gone", "already gone: the key no longer exists"),
        outcome(d, "recovered", "recovered: its owner has been renewing it"),
    )
    msg = render(
        case(
            State.RELEASED,
            (a, b, c, d),
            decided_by="U0ANN",
            decided_ms=NOW + 5000,
            outcomes=outs,
            lock_count=4004,
            outcome_counts={
                "released": 4001,
                "skipped_reacquired": 1,
                "already_gone": 1,
                "recovered": 1,
            },
        ),
        verification="verified: every released key is absent or has a new holder",
    )
    assert headline(msg) == f"Case {CASE_ID}: Released"
    assert buttons(msg) == []
    text = text_of(msg)
    assert "Approved by <@U0ANN> at <!date^1800000005^{date_short_pretty} {time}|" in text
    assert "4,001 of 4,004 locks released." in text
    assert (
        "4,001 released · 1 skipped: re-acquired since it was seen · 1 already gone · "
        "1 recovered: its owner renewed it"
    ) in text
    assert (
        "`lock:a` · stale lease · held 1h23m · TTL none · redis_py → *released* · event "
        "published" in text
    )
    assert "→ *skipped: re-acquired since it was seen*" in text
    assert "Release events published for 1 of the 1 released locks shown." in text
    assert "verified: every released key is absent" in text
    assert "…and 4,000 more locks in this case" in text


def test_incomplete_case_says_how_to_resume() -> None:
    a, b = lock(b"lock:a"), lock(b"lock:b")
    msg = render(
        case(
            State.INCOMPLETE,
            (a, b),
            decided_by="U0ANN",
            decided_ms=NOW,
            outcomes=(
                outcome(a, "released", published=True),
                outcome(b, "error", "not released: Redis refused <NOPERM>"),
            ),
            outcome_counts={"released": 1, "error": 1},
        )
    )
    assert headline(msg) == f"Case {CASE_ID}: Incomplete"
    text = text_of(msg)
    assert f"`lockguard approve {CASE_ID} --by NAME --resume`" in text
    assert "1 lock errored" in text
    assert "not released: Redis refused &lt;NOPERM&gt;" in text
    assert buttons(msg) == []


def test_rejected_case_shows_the_reason_escaped() -> None:
    msg = render(
        case(
            State.REJECTED,
            decided_by="U0BOB",
            decided_ms=NOW,
            decision_reason="job still runs <!channel> @here",
        )
    )
    assert headline(msg) == f"Case {CASE_ID}: Rejected"
    text = text_of(msg)
    assert "Rejected by <@U0BOB>" in text
    assert "job still runs &lt;!channel&gt; @here" in text
    assert "<!channel>" not in text
    assert buttons(msg) == []


def test_pending_case_past_its_expiry_is_expired_without_buttons() -> None:
    msg = render(case(State.PENDING), now_ms=NOW + 2 * HOUR)
    assert headline(msg) == f"Case {CASE_ID}: Expired"
    assert "can no longer be approved" in text_of(msg)
    assert buttons(msg) == []


def test_dry_run_approval_says_nothing_was_touched() -> None:
    c = case(
        State.APPROVED,
        decided_by="U0ANN",
        decided_ms=NOW,
        dry_run=True,
        outcome_counts={"dry_run": 3},
    )
    msg = render(c, dry_run=True)
    assert headline(msg) == f"Case {CASE_ID}: Approved (dry run)"
    text = text_of(msg)
    assert "dry run" in str(msg["blocks"][1]["text"]["text"]).lower()
    assert "no lock was touched and nothing was published" in text
    assert "3 dry run: not touched" in text
    assert buttons(msg) == []


def test_live_approval_in_progress_is_releasing() -> None:
    msg = render(case(State.APPROVED, decided_by="U0ANN", decided_ms=NOW))
    assert headline(msg) == f"Case {CASE_ID}: Releasing"
    assert "releasing 3 locks…" in text_of(msg)
    assert buttons(msg) == []


def test_cli_decider_is_shown_as_code_not_a_mention() -> None:
    msg = render(
        case(State.REJECTED, decided_by="<!channel> ann", decided_ms=NOW, decision_reason="no")
    )
    text = _DATE.sub("", text_of(msg))
    assert "`&lt;!channel&gt; ann`" in text
    assert "<!" not in text


def test_opening_case_cannot_be_decided() -> None:
    msg = render(case(State.OPENING))
    assert headline(msg) == f"Case {CASE_ID}: Being opened"
    assert buttons(msg) == []


@pytest.mark.parametrize("state", list(State))
def test_a_full_preview_of_huge_keys_fits_in_every_state(state: State) -> None:
    locks = tuple(lock(b"lock:" + b"<" * 10_000 + str(i).encode()) for i in range(50))
    outs = tuple(outcome(lk, "error", "x&<>" * 400) for lk in locks)
    c = case(
        state,
        locks,
        lock_count=50_000,
        outcomes=outs,
        outcome_counts={"error": 50_000},
        decided_by="U0ANN",
        decided_ms=NOW,
        decision_reason="<" * 500,
    )
    msg = render(c)
    assert "more locks in this case" in text_of(msg)


def test_state_words() -> None:
    assert state_word(case(State.PENDING), NOW, [("U1AA", NOW)], 3) == (
        "Waiting for another approval (1 of 3)"
    )
    assert (
        state_word(case(State.RELEASED, outcome_counts={"released": 2, "already_gone": 1}), NOW)
        == "Released"
    )
    # Every lock skipped (re-acquired, unproven) or already gone: closed, but not "Released".
    nothing = case(State.RELEASED, outcome_counts={"skipped_unproven": 2, "already_gone": 1})
    assert state_word(nothing, NOW) == "Closed, nothing released"
    assert "Released" not in render(nothing)["text"]
