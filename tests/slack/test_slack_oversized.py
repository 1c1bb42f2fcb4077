"""An abandoned lock under a 60 KiB key, through Slack's real protocol on a real redis-server:
`/lockguard scan` posts it named by its first and last bytes, its length and its sha256, never
whole; the Approve click releases exactly that key,
found again by the digest the approver was shown, and leaves a key made since with the same
first and last bytes and length. Every message is checked against Block Kit's limits."""

from __future__ import annotations

import hashlib
import json

from bot.slack.blocks import ids
from tests.cases.test_oversized_release import big_key
from tests.core.test_layouts import uuid1_hex
from tests.slack.test_slack_app_case_size import LIVE, TWO_HOURS_MS
from tests.slack.test_slack_app_decisions import released_update
from tests.slack_app_harness import Factory, blocks_text
from tests.slack_app_harness import slack_app as slack_app  # the fixture


def test_an_oversized_lock_is_shown_by_its_digest_and_released_from_slack(
    slack_app: Factory,
) -> None:
    app = slack_app(**LIVE)
    key = big_key()
    digest = hashlib.sha256(key).hexdigest()
    app.r.set(key, uuid1_hex(int(app.r.time()[0]) * 1000 - TWO_HOURS_MS))
    case_id, post = app.scan()
    assert case_id
    shown = blocks_text(post)
    assert f"sha256 `{digest}`" in shown
    assert f"oversized: {len(key):,} bytes" in shown
    assert len(json.dumps(post.body)) < 50_000  # the key is never in a message whole
    twin = bytearray(key)
    twin[len(key) // 2] = ord("z")  # made after the approver looked: another key
    app.r.set(bytes(twin), app.r.get(key))
    click = app.click(ids.APPROVE, case_id, user_id="U0ALICE", message_ts=app.posted_ts(post))
    assert click.status == 200
    done = released_update(app, timeout=30)
    assert "Released" in done.body["text"]
    assert f"sha256 `{digest}`" in blocks_text(done)
    assert app.r.exists(key) == 0
    assert app.r.exists(bytes(twin)) == 1
    assert all(len(json.dumps(c.body)) < 100_000 for c in app.fake.calls("chat.update"))
    assert app.fake.hook_errors == []
