"""`lockguard scan` explains itself: why a flagged lock is not in a case yet and when it will
be, why a key is not a lock (table and JSON), and counts that say what they count."""

from __future__ import annotations

import json
import re
from io import StringIO
from pathlib import Path

import pytest
import redis

from bot.cli import main
from bot.core.clock import text_utc
from bot.scan.result import NOT_A_LOCK_KEPT
from tests.core.test_layouts import uuid1_hex


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, real_redis: redis.Redis) -> redis.Redis:
    """The CLI pointed at a real redis-server, from a directory with no stray .env."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REDIS_HOST", "127.0.0.1")
    monkeypatch.setenv("REDIS_PORT", str(real_redis.connection_pool.connection_kwargs["port"]))
    monkeypatch.setenv("LOCKGUARD_LOCK_PATTERNS", "lock:*")
    return real_redis


def run(*argv: str) -> tuple[int, str]:
    out = StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def rows(text: str) -> dict[str, str]:
    """The table's rows by key (the KEY column), each the whole line."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        m = re.search(r"\s(lock:\S+)", line)
        if m and not line.startswith("lockguard scan"):
            found.setdefault(m.group(1), line)
    return found


def server_ms(r: redis.Redis) -> int:
    s, us = r.time()
    return int(s) * 1000 + int(us) // 1000


def test_a_fresh_lock_says_when_it_will_be_offered(env: redis.Redis) -> None:
    env.set(b"lock:fresh", b"tok")
    before = server_ms(env)
    code, text = run("scan")
    assert code == 1
    row = rows(text)["lock:fresh"]
    assert "infinite_ttl" in row
    # 900 s after it was first seen, to the second (the test takes well under a second)
    due = text_utc(before + 900_000)[11:]
    m = re.search(r"offered by the first scan after (\d\d:\d\d:\d\d) UTC, once held 15m00s", row)
    assert m, row
    assert abs(_seconds(m.group(1)) - _seconds(due[:8])) <= 2
    summary = [ln for ln in text.splitlines() if ln.startswith("no case opened:")]
    assert summary == [
        f"no case opened: 1 flagged lock will be offered for release by the first scan after "
        f"{m.group(1)} UTC, once held 15m00s (LOCKGUARD_STALE_THRESHOLD_SECONDS)"
    ]
    code, text = run("cases")
    assert text == (
        "no cases: a scan opens one when a flagged lock may be offered for release "
        "(`lockguard scan` says when)\n"
    )


def _seconds(hms: str) -> int:
    h, m, s = (int(x) for x in hms.split(":"))
    return h * 3600 + m * 60 + s


def test_the_summary_counts_every_waiting_lock_not_only_the_rows_shown(
    env: redis.Redis,
) -> None:
    for i in range(5):
        env.set(f"lock:fresh-{i}".encode(), b"tok")
    code, text = run("scan", "--limit", "2")
    assert code == 1
    assert len(rows(text)) == 2
    assert "... 3 more key(s) not shown" in text
    [summary] = [ln for ln in text.splitlines() if ln.startswith("no case opened:")]
    assert "5 flagged locks will be offered for release by the first scan after" in summary


def test_no_summary_line_when_every_flagged_lock_is_in_the_case(env: redis.Redis) -> None:
    env.set(b"lock:old", uuid1_hex(server_ms(env) - 7_200_000))
    code, text = run("scan")
    assert code == 1
    assert "no case opened" not in text
    assert "not in case" not in text
    assert "offered by the first scan" not in text
    assert re.search(r"^case LG-\d{6}-[0-9a-f]{6}: pending, 1 lock\(s\)", text, re.M)


def test_a_case_says_which_flagged_locks_are_not_in_it(env: redis.Redis) -> None:
    env.set(b"lock:old", uuid1_hex(server_ms(env) - 7_200_000))
    env.set(b"lock:fresh", b"tok")
    code, text = run("scan")
    assert code == 1
    case_id = re.search(r"^case (LG-\S+):", text, re.M).group(1)  # type: ignore[union-attr]
    assert f"not in case {case_id}: 1 flagged lock will be offered for release" in text
    assert "offered by the first scan after" in rows(text)["lock:fresh"]
    assert "offered" not in rows(text)["lock:old"]


def test_auto_remediation_off_is_named_as_why_there_is_no_case(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCKGUARD_AUTO_REMEDIATE", "false")
    env.set(b"lock:old", uuid1_hex(server_ms(env) - 7_200_000))
    code, text = run("scan")
    assert code == 1
    assert (
        "no case opened: 1 lock(s) could be offered, but auto-remediation is off "
        "(LOCKGUARD_AUTO_REMEDIATE=false)"
    ) in text


def test_a_lock_already_in_an_open_case_is_named(env: redis.Redis) -> None:
    env.set(b"lock:old", uuid1_hex(server_ms(env) - 7_200_000))
    assert run("scan")[0] == 1
    code, text = run("scan")
    assert code == 1
    assert "no case opened: 1 lock(s) already in an open case (`lockguard cases`)" in text


def test_not_a_lock_keys_have_their_reason_in_the_table_and_are_not_counted_as_locks(
    env: redis.Redis,
) -> None:
    env.rpush(b"lock:queue", b"job")
    env.hset(b"lock:stats", mapping={b"hits": b"3", b"misses": b"1"})
    env.set(b"lock:a", b"tok", px=600_000)
    code, text = run("scan")
    assert code == 0
    head = text.splitlines()[0]
    assert "1 lock(s) and 2 key(s) that are not locks matching lock:*" in head
    assert "a list: no lock library keeps a lock in one" in rows(text)["lock:queue"]
    stats = re.split(r"\s{2,}", rows(text)["lock:stats"])
    assert stats[0] == "not_a_lock"
    assert len(stats) == 9  # VERDICT ... OWNER, IMPACT, and a NOTE saying why
    assert stats[-1]
    assert "NOTE" in text.splitlines()[1]


def test_scan_json_lists_not_a_lock_keys_capped_with_their_reason(env: redis.Redis) -> None:
    for i in range(NOT_A_LOCK_KEPT + 3):
        env.rpush(f"lock:queue-{i}".encode(), b"job")
    env.set(b"lock:forever", b"tok")
    code, out = run("scan", "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["by_reason"]["not_a_lock"] == NOT_A_LOCK_KEPT + 3  # the count, as before
    listed = doc["not_a_lock_keys"]
    assert len(listed) == NOT_A_LOCK_KEPT
    assert doc["not_a_lock_keys_truncated"] == 3
    first = listed[0]
    assert first["key"].startswith("lock:queue-")
    assert first["key_hex"] == first["key"].encode().hex()
    assert first["type"] == "list"
    assert first["note"] == "a list: no lock library keeps a lock in one"
    assert [f["key"] for f in doc["findings"]] == ["lock:forever"]


def test_scan_json_with_no_not_a_lock_key_has_an_empty_list(env: redis.Redis) -> None:
    env.set(b"lock:a", b"tok", px=600_000)
    doc = json.loads(run("scan", "--json")[1])
    assert doc["not_a_lock_keys"] == []
    assert doc["not_a_lock_keys_truncated"] == 0


def test_owner_in_the_table_is_the_owner_in_json(env: redis.Redis) -> None:
    token = uuid1_hex(server_ms(env) - 7_200_000)  # redis-py: the owner is the uuid1's node
    env.set(b"lock:old", token)
    env.set(b"lock:plain", b"some-token-nobody-names")  # no owner known
    text = run("scan")[1]
    doc = json.loads(run("scan", "--json")[1])
    owners = {f["key"]: f["owner"] for f in doc["findings"]}
    assert owners["lock:old"].startswith("node ")
    assert owners["lock:old"] in rows(text)["lock:old"]
    assert owners["lock:plain"] == ""
    plain = rows(text)["lock:plain"]
    assert "some-token-nobody-names" not in plain  # the token is no owner
    assert " - " in plain


def test_the_first_seen_legend_only_when_a_row_is_first_seen(env: redis.Redis) -> None:
    env.set(b"lock:a", b"tok", px=600_000)
    assert "* first seen this scan" in run("scan")[1]
    text = run("scan")[1]  # the second look: no row is first seen
    assert "*" not in rows(text)["lock:a"]
    assert "first seen this scan" not in text
