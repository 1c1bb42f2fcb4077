"""The findings message counts what it calls flagged: a lock its owner keeps renewing looks alive
and is never offered, so it is reported on its own line, not among the locks flagged."""

from __future__ import annotations

from bot.core.model import Reason
from tests.block_kit import check_message
from tests.slack.test_slack_blocks import all_text, finding, post


def test_a_live_lock_is_not_counted_among_the_locks_flagged() -> None:
    fs = [
        finding(b"lock:a", Reason.STALE_LEASE),
        finding(b"lock:b", Reason.INFINITE_TTL),
        finding(b"lock:live", Reason.LONG_HELD_RENEWING, ttl_ms=9_000),
    ]
    msg = post(fs).message
    check_message(msg)
    text = all_text(msg)
    assert "*Locks flagged*\n2 (1 no expiry, 1 stale lease)" in text
    assert "*Long held, renewing*\n1 (looks alive; never offered)" in text
    assert "lockguard: 2 locks flagged on" in msg["text"]
    assert ", 1 more long held (renewing)" in msg["text"]
    assert "`lock:live`" in text  # still listed: reported, never offered


def test_without_a_live_lock_there_is_no_renewing_line() -> None:
    msg = post([finding(b"lock:a", Reason.STALE_LEASE)]).message
    text = all_text(msg)
    assert "*Locks flagged*\n1 (1 stale lease)" in text
    assert "Long held, renewing" not in text
    assert "long held" not in msg["text"]
