"""Least privilege for `/lockguard scan`, through Slack's protocol into the running app, on a
real redis-server: a pattern only narrows the configured ones, scans are posted only in
LOCKGUARD_SLACK_CHANNEL, only scanners may run them, one at a time and so many a minute, and a
narrow scan keeps every other lock's history (a pending case for them still releases)."""

from __future__ import annotations

import time

from bot.slack.blocks import ids
from bot.store import keyspace
from tests.slack_app_harness import ALERTS, Factory, SlackAppHarness, blocks_text, buttons
from tests.slack_app_harness import slack_app as slack_app  # the fixture

LIVE = {"LOCKGUARD_DRY_RUN": "false", "LOCKGUARD_APPROVERS": "U0ALICE"}


def no_scan_ran(app: SlackAppHarness) -> bool:
    """Nothing scanned, once a later request has gone through the app (`settle`) and every job
    handed to its worker pool has finished (`idle`): positive signals, not a sleep."""
    app.settle()
    app.idle()
    return (
        app.fake.calls("chat.postMessage") == []
        and app.r.get(keyspace.LAST_SCAN) is None
        and app.r.zcard(keyspace.CASES) == 0
    )


def answers(app: SlackAppHarness, name: str, count: int = 1) -> list[str]:
    return [str(c.body["text"]) for c in app.fake.wait_for("response_url", count)]


def test_a_slash_scan_cannot_aim_the_guard_at_keys_that_are_not_under_the_patterns(
    slack_app: Factory,
) -> None:
    app = slack_app(**LIVE)
    app.r.set(b"session:abc", b"user-42")
    app.r.set(b"apikey:prod", b"sk-live")
    for typed in ("session:*,apikey:*", "lock-signal:*", "lock:*,session:*", "apikey:?", "s*"):
        reply = app.slash(f"scan {typed}")
        assert reply.status == 200
        assert "is not within the configured lock patterns" in reply.text, typed
        assert "LOCKGUARD_LOCK_PATTERNS: lock:*" in reply.text
    assert "would also match lockguard's own keys" in app.slash("scan *").text
    assert no_scan_ran(app)
    assert app.r.get(b"session:abc") == b"user-42"
    assert app.r.get(b"apikey:prod") == b"sk-live"


def test_a_narrowing_pattern_scans_and_the_message_says_which_and_who_asked(
    slack_app: Factory,
) -> None:
    app = slack_app(**LIVE)
    app.plant(b"lock:billing:1")
    app.plant(b"lock:other:1")
    _, post = app.scan("lock:billing:*", user_id="U0ALICE")
    shown = blocks_text(post)
    assert "lock:billing:1" in shown
    assert "lock:other:1" not in shown
    assert "`lock:billing:*` (narrowing LOCKGUARD_LOCK_PATTERNS)" in shown
    assert "asked by <@U0ALICE> with `/lockguard scan`" in shown


def test_a_scan_typed_in_another_channel_gets_a_pointer_and_posts_nothing(
    slack_app: Factory,
) -> None:
    app = slack_app(**LIVE)
    app.plant()
    reply = app.slash("scan", channel_id="C0RANDOM", user_id="U0ALICE")
    assert f"<#{ALERTS}>" in reply.text
    assert no_scan_ran(app)


def test_only_scanners_may_scan_by_default_the_approvers(slack_app: Factory) -> None:
    app = slack_app(**LIVE)
    app.plant()
    told = app.slash("scan", user_id="U0MALLORY").text  # the list decides: said in the ack
    assert "you may not run `/lockguard scan`" in told
    assert "`U0ALICE`" in told
    assert no_scan_ran(app)


def test_lockguard_scanners_names_who_may_scan(slack_app: Factory) -> None:
    app = slack_app(**LIVE, LOCKGUARD_SCANNERS="U0BOB")
    app.plant()
    assert "you may not run" in app.slash("scan", user_id="U0ALICE").text
    _, post = app.scan(user_id="U0BOB")
    assert "asked by <@U0BOB>" in blocks_text(post)
    assert buttons(post)[ids.APPROVE].startswith("LG-")


def test_a_scanner_group_is_read_from_slack_and_refused_asks_use_no_limit(
    slack_app: Factory,
) -> None:
    app = slack_app(**LIVE, LOCKGUARD_SCANNERS="S0SCAN")
    app.fake.set_usergroup("S0SCAN", ["U0BOB"])
    app.plant()
    app.slash("scan", user_id="U0MALLORY", response_url=app.fake.response_url("first"))
    assert "you may not run" in answers(app, "first")[0]  # the group read from Slack first
    for _ in range(25):  # then from the cache, in the ack: none counts against the limits
        assert "you may not run" in app.slash("scan", user_id="U0MALLORY").text
    assert no_scan_ran(app)
    _, post = app.scan(user_id="U0BOB")
    assert "asked by <@U0BOB>" in blocks_text(post)
    assert len(app.fake.calls("usergroups.users.list")) == 1


def test_a_burst_of_slash_scans_runs_a_few_and_answers_the_rest(slack_app: Factory) -> None:
    app = slack_app(**LIVE)
    for i in range(300):
        app.plant(f"lock:burst:{i}".encode())
    acks = [
        app.slash("scan", user_id="U0ALICE", response_url=app.fake.response_url(f"b{i}")).text
        for i in range(30)
    ]
    started = [a for a in acks if a.startswith("Scanning")]
    assert 1 <= len(started) <= 5
    refused = [a for a in acks if not a.startswith("Scanning")]
    assert all(
        "is running, started by <@U0ALICE>" in a or "at most 5 scans a minute" in a for a in refused
    )
    app.fake.wait_for("chat.postMessage", len(started), timeout=20)
    app.settle()
    app.idle()  # every scan job started has finished
    posts = [c for c in app.fake.calls("chat.postMessage") if "thread_ts" not in c.body]
    assert len(posts) == len(started)
    assert app.calls_but_settling("response_url") == []  # none failed (a scan lease was busy)


def test_a_held_scan_lease_is_named_and_ends_within_its_lifetime(slack_app: Factory) -> None:
    app = slack_app(**LIVE)
    app.r.set(keyspace.SCAN_LEASE, b"0123abcd|schedule", px=20_000)
    app.slash("scan", user_id="U0ALICE", response_url=app.fake.response_url("busy"))
    [told] = answers(app, "busy")
    assert "a scan is running on this Redis, started by the schedule" in told
    assert "its lease ends within 20s" in told
    assert 0 < app.r.pttl(keyspace.SCAN_LEASE) <= 20_000  # it expires by itself


def test_a_narrow_scan_keeps_the_history_of_every_other_lock(slack_app: Factory) -> None:
    """The hole: a narrow scan used to start a new tenure generation, so the pending case for the
    locks it did not cover released "0 of 3" (skipped_unproven) and still said Released."""
    app = slack_app(**LIVE)
    keys = [b"lock:x:1", b"lock:x:2", b"lock:x:3"]
    for k in keys:
        app.plant(k)
    app.plant(b"lock:y:1")
    case_id, post = app.scan("lock:x:*", user_id="U0ALICE")
    assert case_id
    for _ in range(3):  # repeated narrow scans of other locks
        app.scan("lock:y:*", user_id="U0ALICE")
    app.click(ids.APPROVE, case_id, user_id="U0ALICE", message_ts=app.posted_ts(post))
    deadline = time.monotonic() + 10
    while app.r.exists(*keys) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert app.r.exists(*keys) == 0
    update = app.fake.wait_for("chat.update")[-1]
    assert "Released" in update.body["text"]
    assert "skipped" not in blocks_text(update).lower()


def test_a_case_with_nothing_released_is_not_labelled_released(slack_app: Factory) -> None:
    app = slack_app(**LIVE)
    app.plant(b"lock:x:1")
    case_id, post = app.scan(user_id="U0ALICE")
    app.r.set(b"lock:x:1", b"a-new-holder")  # re-acquired since the case was opened
    app.click(ids.APPROVE, case_id, user_id="U0ALICE", message_ts=app.posted_ts(post))
    update = app.fake.wait_for("chat.update")[-1]
    assert "Closed, nothing released" in update.body["text"]
    assert "Released" not in update.body["text"]
    assert app.r.get(b"lock:x:1") == b"a-new-holder"


def test_a_class_redis_reads_as_a_range_cannot_widen_a_scan(slack_app: Factory) -> None:
    """`[a-]` is a range to Redis (`]`..`a`) and its class runs to the end of the pattern:
    `app:*[a-]:lock` matches `app:sessions:u42-token-a`, so it does not narrow `app:*:lock`."""
    app = slack_app(**LIVE, LOCKGUARD_LOCK_PATTERNS="app:*:lock")
    app.r.set(b"app:sessions:u42-token-a", b"session-token-1")
    app.r.set(b"app:billing:api-keya", b"sk-live-2")
    reply = app.slash("scan app:*[a-]:lock")
    assert reply.status == 200
    assert "opens a class with '[' that no ']' closes" in reply.text  # refused as typed
    assert no_scan_ran(app)


def test_a_long_pattern_from_someone_who_may_not_scan_is_refused_for_who_they_are(
    slack_app: Factory,
) -> None:
    app = slack_app(**LIVE)
    for typed in ("lock:" + "a" * 600, "lock:" + "*a" * 300, "lock:" + "[a-z]" * 120):
        reply = app.slash(f"scan {typed}", user_id="U0MALLORY")
        assert reply.status == 200  # not a crash
        assert "you may not run `/lockguard scan`" in reply.text
        assert "LOCKGUARD_LOCK_PATTERNS" not in reply.text  # no pattern named to them
    grouped = slack_app(**LIVE, LOCKGUARD_SCANNERS="S0SCAN")
    grouped.fake.set_usergroup("S0SCAN", ["U0BOB"])
    grouped.slash(
        "scan session:*", user_id="U0MALLORY", response_url=grouped.fake.response_url("g")
    )
    [told] = answers(grouped, "g")
    assert "you may not run" in told
    assert "LOCKGUARD_LOCK_PATTERNS" not in told
    assert no_scan_ran(app)
    assert no_scan_ran(grouped)


def test_a_scanner_s_pattern_is_bounded_and_told_why(slack_app: Factory) -> None:
    app = slack_app(**LIVE)
    cases = {
        "lock:" + "a" * 600: "605 characters; at most 512 are accepted",
        "lock:" + "*a" * 20: "has 20 wildcards; at most 16 are accepted",
        "lock:" + "[a-z]" * 17: "has 17 wildcards; at most 16 are accepted",
        ",".join(f"lock:{i}:*" for i in range(9)): "9 patterns; at most 8 are accepted",
    }
    for typed, said in cases.items():
        reply = app.slash(f"scan {typed}", user_id="U0ALICE")
        assert reply.status == 200
        assert said in reply.text, typed
    assert no_scan_ran(app)
