"""On a terminal (a real pty), `lockguard scan`'s table fits its width: long keys and owners are
folded within their columns and each row's note becomes a numbered footnote, wrapped to the
width (Rich draws it); piped, the table is one line per row, as before."""

from __future__ import annotations

import re

import pytest
import redis

from tests.conftest import RedisServer
from tests.core.test_layouts import uuid1_hex
from tests.test_cli_big_cases import on_a_terminal
from tests.test_cli_cases import point_at, run

KEYS = [f"lock:billing:invoice-export:cust-{i:04d}:[eu]".encode() for i in range(3)]


@pytest.fixture
def env(
    monkeypatch: pytest.MonkeyPatch, redis_server: RedisServer, real_redis: redis.Redis
) -> redis.Redis:
    point_at(monkeypatch, redis_server)
    now_ms = int(real_redis.time()[0]) * 1000
    for i, key in enumerate(KEYS):
        real_redis.set(key, uuid1_hex(now_ms - 60_000 * (i + 1)))  # fresh: a note each
    return real_redis


@pytest.mark.parametrize("columns", [80, 120])
def test_the_table_fits_the_terminal_and_notes_are_footnotes(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    code, text = on_a_terminal(["scan"], typed="")
    assert code == 1, text
    assert "scanning redis://127.0.0.1:" in text  # the spinner on stderr while it ran
    text = text[text.index("lockguard scan of") :]  # the table, on stdout, after it
    lines = text.replace("\r", "").splitlines()
    table = lines[1 : next(i for i, ln in enumerate(lines) if ln.startswith("verdicts:"))]
    assert max(len(ln) for ln in table) <= columns, "\n".join(table)
    assert "(1)" in table[1]  # the first row's note, by its number
    footnote = re.compile(r"^\(\d+\) (offered|not offered|never offered)")
    rows = [ln for ln in table if not footnote.match(ln)]
    start, end = rows[0].index("KEY"), rows[0].index("OWNER")
    keys = "".join(ln[start:end].strip() for ln in rows[1:])
    for key in KEYS:  # every key whole, folded within its column
        assert key.decode() in keys, keys
    notes = [ln for ln in table if ln.startswith("(1) ")]
    assert notes
    assert "once held 15m00s" in " ".join(table[table.index(notes[0]) :])


def test_piped_the_table_is_a_line_per_row(env: redis.Redis) -> None:
    code, text = run("scan")
    assert code == 1
    rows = [ln for ln in text.splitlines() if ln.startswith("infinite_ttl")]
    assert len(rows) == 3
    assert all("offered by the first scan after" in ln for ln in rows)
    assert "(1)" not in text
