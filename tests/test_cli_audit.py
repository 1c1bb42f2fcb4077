"""`lockguard audit` as a user reads it: each entry on one line, every field whole (never a JSON
object cut off at a width), anything a person typed escaped."""

from __future__ import annotations

import json

import redis

from tests.test_cli_cases import env, open_case, run

__all__ = ["env"]  # the fixture, used by name


def test_audit_lines_show_every_field_whole(env: redis.Redis) -> None:
    case_id = open_case(env)
    reason = "held by a worker that died\x1b[2J " + "x" * 80
    code, _ = run("reject", case_id, "--by", "bob", "--reason", reason)
    assert code == 0
    code, text = run("audit", "--case", case_id)
    assert code == 0
    lines = text.splitlines()
    [decision] = [ln for ln in lines if "  decision  " in ln]
    assert f"{case_id} by bob" in decision
    assert 'decision: "rejected"' in decision
    assert 'reason: "held by a worker that died\\u001b[2J xxx' in decision  # escaped, not sent
    assert "\x1b" not in text
    assert '…"' in decision  # a long text is shortened inside its quotes
    [opened] = [ln for ln in lines if "  case_opened  " in ln]
    assert "first_locks: 1 item;" in opened  # a list as its size
    for line in lines:
        assert line.count("{") == line.count("}"), line
        assert not line.endswith("…"), line
    code, full = run("audit", "--case", case_id, "--json")
    [entry] = [e for e in json.loads(full)["entries"] if e["event"] == "decision"]
    assert entry["data"]["reason"].startswith("held by a worker that died")  # whole in --json
