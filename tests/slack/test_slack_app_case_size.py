"""A mass incident is one case: a scan's case holds every releasable lock it found (not only the
worst a message lists), the message shows the worst, and the case's whole list goes in the
message's thread as a CSV file (`files_upload_v2`: the mock records the upload and
`files.completeUploadExternal`). An Approve click works once that file is in, so every released
lock was in the list the approver was shown; if Slack refuses the file, the case can only be
rejected here. Real redis-server, signed requests, every message checked by the mock.
"""

from __future__ import annotations

import csv
import io
import time
from typing import Any

import pytest

import bot.slack.approve_action
from bot.slack.blocks import ids
from bot.store.keyspace import CASES, case_key, slack_message_key
from tests.core.test_layouts import uuid1_hex
from tests.slack.test_slack_app_decisions import released_update
from tests.slack_app_harness import Factory, SlackAppHarness, blocks_text, buttons
from tests.slack_app_harness import slack_app as slack_app  # the fixture

LIVE = {"LOCKGUARD_DRY_RUN": "false", "LOCKGUARD_APPROVERS": "U0ALICE"}
TWO_HOURS_MS = 7_200_000
COLUMNS = ["n", "key", "key_sha256", "layout", "verdict", "held", "ttl", "holder", "renewal"]


def plant_many(app: SlackAppHarness, n: int) -> list[bytes]:
    """`n` redis-py locks with no TTL, taken 2 h ago (older for the lower numbers)."""
    now_ms = int(app.r.time()[0]) * 1000
    keys = [f"lock:many:{i:04d}".encode() for i in range(n)]
    with app.r.pipeline(transaction=False) as pipe:
        for i, key in enumerate(keys):
            pipe.set(key, uuid1_hex(now_ms - TWO_HOURS_MS - (n - i) * 1000))
        pipe.execute()
    return keys


def attached(
    app: SlackAppHarness, case_id: str, post_ts: str, timeout: float = 20
) -> list[dict[str, str]]:
    """The rows of the case's list uploaded into the thread of `post_ts` (once it is in)."""
    name = f"lockguard-{case_id}.csv"
    deadline = time.monotonic() + timeout
    while True:
        done = [
            c
            for c in app.fake.calls("files.completeUploadExternal")
            if [f.get("title") for f in c.body.get("files") or []] == [name]
        ]
        if done or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(done) == 1, app.fake.summary()
    complete = done[0]
    assert complete.body["thread_ts"] == post_ts
    assert complete.body["channel_id"] == app.fake.calls("chat.postMessage")[0].body["channel"]
    assert f"Every lock of case `{case_id}`" in complete.body["initial_comment"]
    [file_id] = [f["id"] for f in complete.body["files"]]
    [upload] = [c for c in app.fake.calls("upload") if c.target == file_id]
    rows = list(csv.reader(io.StringIO(upload.body["content"].decode("utf-8"))))
    assert rows[0] == COLUMNS
    return [dict(zip(COLUMNS, r, strict=True)) for r in rows[1:]]


def wait_listed(app: SlackAppHarness, case_id: str) -> None:
    """Until the case's list is in its thread (its Approve button is refused till then)."""
    deadline = time.monotonic() + 20
    while app.r.hget(slack_message_key(case_id), "listed") != b"1":
        assert time.monotonic() < deadline, "the list never went in"
        time.sleep(0.02)


def refuse_uploads(app: SlackAppHarness) -> None:
    """From now on Slack refuses every file (the messages themselves go out)."""
    app.fake.fail("files.getUploadURLExternal", error="not_allowed_token_type", times=None)


def test_3000_stuck_locks_are_one_case_listed_whole_and_one_typed_count_releases_them(
    slack_app: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bot.slack.approve_action, "PROGRESS_EVERY_S", 0.01)
    app = slack_app(**LIVE)
    keys = plant_many(app, 3_000)
    case_id, post = app.scan()
    assert case_id
    text = blocks_text(post)
    assert "approving releases *3,000 locks*" in text
    assert f"`lockguard-{case_id}.csv` in this message's thread" in text
    assert app.r.hget(case_key(case_id), "lock_count") == b"3000"
    rows = attached(app, case_id, app.posted_ts(post))
    assert [r["n"] for r in rows] == [str(i) for i in range(1, 3_001)]
    assert sorted(r["key"].encode() for r in rows) == keys
    assert {(r["layout"], r["verdict"], r["ttl"]) for r in rows} == {
        ("redis_py", "infinite_ttl", "none")
    }
    wait_listed(app, case_id)
    assert [c for c in app.fake.calls("chat.postMessage") if c.body.get("thread_ts")] == []

    click = app.click(ids.APPROVE, case_id, trigger_id="3.0.00", message_ts=app.posted_ts(post))
    assert click.status == 200
    view = app.fake.wait_for("views.open")[0].body["view"]
    assert f"Type 3000 to release 3,000 locks from case {case_id}" in str(view)
    assert app.submit_approve(case_id, "3000").status == 200
    done = released_update(app, timeout=60)
    assert "Released" in done.body["text"]
    assert app.r.exists(*keys) == 0
    progress = [c for c in app.fake.calls("chat.update") if "*Releasing…*" in blocks_text(c)]
    assert progress  # the message moved while the release ran
    assert "of 3,000 locks done" in blocks_text(progress[0])
    assert app.fake.hook_errors == []


def test_a_case_beyond_the_findings_a_message_lists_is_still_one_case(slack_app: Factory) -> None:
    """The scan keeps the worst 200 findings for its message; its case holds all 230."""
    app = slack_app(**LIVE)
    keys = plant_many(app, 230)
    case_id, post = app.scan()
    assert "approving releases *230 locks*" in blocks_text(post)
    assert "beyond those listed" not in blocks_text(post)
    rows = attached(app, case_id, app.posted_ts(post))
    assert sorted(r["key"].encode() for r in rows) == keys
    wait_listed(app, case_id)
    app.click(ids.APPROVE, case_id, user_id="U0ALICE", message_ts=app.posted_ts(post))
    assert "Released" in released_update(app, timeout=30).body["text"]
    assert app.r.exists(*keys) == 0
    second_id, _ = app.scan()
    assert second_id == ""  # nothing left for another case


def test_a_case_whose_list_slack_refused_cannot_be_approved_only_rejected(
    slack_app: Factory,
) -> None:
    app = slack_app(**LIVE)
    keys = plant_many(app, 60)  # the message lists 20; the file would list all 60
    refuse_uploads(app)
    case_id, post = app.scan()
    assert case_id
    [update] = app.fake.wait_for("chat.update")
    assert update.body["ts"] == app.posted_ts(post)
    assert buttons(update) == {ids.REJECT: case_id}  # no Approve
    assert "cannot be approved here" in blocks_text(update)
    assert app.r.hget(slack_message_key(case_id), "listed") == b"0"
    assert app.fake.calls("files.completeUploadExternal") == []

    # the Approve button of the message as first posted: refused, nothing released
    app.click(ids.APPROVE, case_id, user_id="U0ALICE", message_ts=app.posted_ts(post))
    [told] = app.fake.wait_for("chat.postEphemeral")
    assert "Nothing was approved: not every lock of case" in told.body["text"]
    assert app.r.hget(case_key(case_id), "state") == b"pending"
    assert app.r.exists(*keys) == 60


def test_an_approve_click_before_the_list_is_in_is_refused(slack_app: Factory) -> None:
    app = slack_app(**LIVE)
    keys = plant_many(app, 60)
    case_id, post = app.scan()
    wait_listed(app, case_id)
    app.r.hset(slack_message_key(case_id), "listed", 0)  # as while its file is being uploaded
    app.click(ids.APPROVE, case_id, user_id="U0ALICE", message_ts=app.posted_ts(post))
    [told] = app.fake.wait_for("chat.postEphemeral")
    assert "click Approve again once it has" in told.body["text"]
    assert app.r.exists(*keys) == 60
    app.r.hset(slack_message_key(case_id), "listed", 1)  # the file is in
    app.click(ids.APPROVE, case_id, user_id="U0ALICE", message_ts=app.posted_ts(post))
    assert "Released" in released_update(app, timeout=10).body["text"]
    assert app.r.exists(*keys) == 0


def test_a_message_record_that_does_not_say_listed_is_not_approvable(slack_app: Factory) -> None:
    """Only a record saying its thread is whole lets Approve through: one without the field (an
    older version's, or one hand-edited) is refused, never taken on trust."""
    app = slack_app(**LIVE)
    keys = plant_many(app, 60)
    case_id, post = app.scan()
    wait_listed(app, case_id)
    app.r.hdel(slack_message_key(case_id), "listed")
    app.click(ids.APPROVE, case_id, user_id="U0ALICE", message_ts=app.posted_ts(post))
    [told] = app.fake.wait_for("chat.postEphemeral")
    assert "Nothing was approved: not every lock of case" in told.body["text"]
    app.idle()
    assert app.r.exists(*keys) == 60


def posted_late(app: SlackAppHarness, n: int, **fault: Any) -> tuple[str, list[bytes]]:
    """A case of `n` locks whose findings message Slack did not take, waiting in Redis."""
    keys = plant_many(app, n)
    app.fake.fail("chat.postMessage", error="fatal_error", status=500, times=None)
    assert app.slash("scan", response_url=app.fake.response_url("scan")).status == 200
    assert "waits in Redis" in app.fake.wait_for("response_url", timeout=10)[0].body["text"]
    [case_id] = [k.decode() for k in app.r.zrange(CASES, 0, -1)]
    app.fake.clear_faults()
    app.fake.clear()
    return case_id, keys


def test_a_case_posted_late_gets_its_whole_list_in_its_thread(slack_app: Factory) -> None:
    """A case whose findings message Slack did not take is posted later from Redis: its message
    lists the first of its locks, and its thread the file of every one, before anyone can
    approve."""
    app = slack_app(**LIVE, repost_every=3600)
    case_id, keys = posted_late(app, 120)
    app.served.slack.reposter.run_once(wait=True)
    [post] = [p for p in app.fake.calls("chat.postMessage") if "thread_ts" not in p.body]
    assert buttons(post) == {ids.APPROVE: case_id, ids.REJECT: case_id}
    assert "Posted late" in blocks_text(post)
    assert f"`lockguard-{case_id}.csv`" in blocks_text(post)
    rows = attached(app, case_id, app.posted_ts(post))
    assert sorted(r["key"].encode() for r in rows) == keys
    assert app.r.hget(slack_message_key(case_id), "listed") == b"1"
    assert app.fake.hook_errors == []


def test_a_case_posted_late_whose_list_slack_refused_cannot_be_approved(
    slack_app: Factory,
) -> None:
    app = slack_app(**LIVE, repost_every=3600)
    case_id, _ = posted_late(app, 120)
    refuse_uploads(app)
    app.served.slack.reposter.run_once(wait=True)
    [update] = app.fake.wait_for("chat.update")
    assert buttons(update) == {ids.REJECT: case_id}
    assert "Posted late" in blocks_text(update)
    assert "cannot be approved here" in blocks_text(update)
    assert app.r.hget(slack_message_key(case_id), "listed") == b"0"


def test_a_key_of_slack_markup_and_a_formula_is_inert_in_the_file(slack_app: Factory) -> None:
    app = slack_app(**LIVE, LOCKGUARD_LOCK_PATTERNS="lock:*,=*")
    plant_many(app, 30)
    hostile = b'=HYPERLINK("http://evil")<!channel>\xff'
    app.plant(hostile, age_ms=10 * TWO_HOURS_MS)
    case_id, post = app.scan()
    rows = attached(app, case_id, app.posted_ts(post))
    assert len(rows) == 31
    [row] = [r for r in rows if "HYPERLINK" in r["key"]]
    assert row["key"] == '\'=HYPERLINK("http://evil")<!channel>\\xff'  # text, not a formula


def test_a_lost_record_whose_list_slack_refuses_is_not_said_to_be_listed(
    slack_app: Factory,
) -> None:
    """Redis lost where the case's message is; the click adopts it, but Slack refuses the list:
    the approver is told the locks are not all shown (never "the list is in its thread")."""
    app = slack_app(**LIVE)
    keys = plant_many(app, 60)
    case_id, post = app.scan()
    wait_listed(app, case_id)
    app.r.delete(slack_message_key(case_id))
    refuse_uploads(app)
    app.click(ids.APPROVE, case_id, user_id="U0ALICE", message_ts=app.posted_ts(post))
    [told] = app.fake.wait_for("chat.postEphemeral")
    assert "Nothing was approved: not every lock of case" in told.body["text"]
    assert "lost track" not in told.body["text"]
    assert app.r.hget(slack_message_key(case_id), "listed") == b"0"
    app.idle()
    assert app.r.exists(*keys) == 60
