"""A case is approvable from Slack only when its message's record says every lock is shown.

`CasePosts.post_scan` posts the findings message (with Approve) first, then saves where it is with
`listed=0` (a case too big for its message), then uploads the list file. When that save fails (a
transient Redis write refusal: OOM under `maxmemory`, a failover's READONLY) no file goes up and
nothing is saved. A missing record once counted as listed ("nothing says otherwise"), and one
Approve click released every lock of the case, most of which the approver was never shown; a big
case's typed-count modal adopted the message as listed, with the same effect. Now the message
clicked on is adopted as not listed, the case's whole list is put in its thread, and only then
(a second click, or the modal's submission) is the case approved.

Real redis-server, signed requests into the Bolt app, the mock Slack Web API.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from bot.slack.blocks import ids
from bot.store.keyspace import case_key, slack_message_key
from tests.block_kit import check_message
from tests.slack.test_slack_app_case_size import attached as listed_rows
from tests.slack.test_slack_app_case_size import plant_many
from tests.slack.test_slack_app_decisions import released_update
from tests.slack_app_harness import Factory, buttons
from tests.slack_app_harness import slack_app as slack_app  # the fixture

N = 300


@pytest.mark.parametrize("typed", [False, True], ids=["click", "typed-count modal"])
def test_a_case_whose_message_record_was_lost_is_approved_only_once_its_list_is_in(
    slack_app: Factory, redis_server: Any, typed: bool
) -> None:
    env = {"LOCKGUARD_DRY_RUN": "false"}
    if typed:
        env["LOCKGUARD_CONFIRM_TYPED_ABOVE"] = "10"
    app = slack_app(**env)
    admin = redis.Redis(host="127.0.0.1", port=redis_server.port)
    keys = plant_many(app, N)

    tripped: list[bool] = []

    def on_message(body: dict[str, Any]) -> object:
        verdict = check_message(body)
        # Slack takes the findings message; right after, Redis refuses writes for a moment.
        if not tripped and ids.APPROVE in json.dumps(body.get("blocks") or ""):
            tripped.append(True)
            admin.config_set("maxmemory", "1")
        return verdict

    app.fake.on_message = on_message
    try:
        before = len(app.fake.calls("chat.postMessage"))
        reply = app.slash("scan", response_url=app.fake.response_url("scan-1"))
        assert reply.status == 200, reply.text
        post = app.fake.wait_for("chat.postMessage", before + 1)[before]
        # the scan's answer: its message is out, where it is could not be saved
        app.fake.wait_for("response_url", where=lambda c: c.target == "scan-1")
    finally:
        admin.config_set("maxmemory", "0")  # Redis takes writes again
    case_id = buttons(post)[ids.APPROVE]
    assert app.r.hget(case_key(case_id), "lock_count") == str(N).encode()
    assert not app.r.exists(slack_message_key(case_id))  # no record of the message
    assert not app.fake.calls("files.completeUploadExternal")  # the list never went out

    # An approver clicks Approve on the message Slack shows (it lists only the worst locks).
    told = len(app.fake.calls("chat.postEphemeral"))
    click = {"channel_id": post.body["channel"], "message_ts": app.posted_ts(post)}
    assert app.click(ids.APPROVE, case_id, trigger_id="1.0.00", **click).status == 200
    if typed:  # the modal opens; the message clicked on is adopted and its list put in
        app.fake.wait_for("views.open")
        app.idle()  # the click's job, which put the list in after the modal opened, has ended
    else:  # refused: the message clicked on is adopted and its list put in; click again
        [refusal] = app.fake.wait_for("chat.postEphemeral", told + 1)[told:]
        assert (
            "Nothing was approved: lockguard had lost track of the message"
            in (refusal.body["text"])
        )
        app.idle()
        assert all(app.r.exists(k) for k in keys)  # not by the click that put the list in
    # The case's whole list is now in the thread of the message clicked on.
    rows = listed_rows(app, case_id, app.posted_ts(post))
    assert sorted(r["key"].encode() for r in rows) == keys
    assert app.r.hget(slack_message_key(case_id), "listed") == b"1"
    if typed:
        assert app.submit_approve(case_id, str(N)).status == 200
    else:
        assert app.click(ids.APPROVE, case_id, trigger_id="1.0.01", **click).status == 200
    released_update(app, timeout=30)
    assert not any(app.r.exists(k) for k in keys)
    admin.close()
