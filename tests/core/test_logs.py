"""Structured logs: one line per scan, case opened, decision, release outcome and error, on
stderr, in text or JSON, with keys escaped and no secret anywhere."""

from __future__ import annotations

import io
import json
import logging
import os

import pytest
import redis

from bot import cli
from bot.core import logs
from bot.slack.blocks import ids
from tests.conftest import RedisServer
from tests.core.test_layouts import uuid1_hex
from tests.slack_app_harness import Factory
from tests.slack_app_harness import slack_app as slack_app  # the fixture


@pytest.fixture
def env(
    monkeypatch: pytest.MonkeyPatch, auth_redis_server: RedisServer, auth_redis_password: str
) -> redis.Redis:
    monkeypatch.setenv(
        "REDIS_URL", f"redis://:{auth_redis_password}@127.0.0.1:{auth_redis_server.port}/0"
    )
    monkeypatch.setenv("LOCKGUARD_LOG_LEVEL", "info")
    monkeypatch.setenv("LOCKGUARD_LOG_FORMAT", "json")
    monkeypatch.chdir(os.path.dirname(__file__))  # no stray .env
    client = auth_redis_server.client(password=auth_redis_password)
    client.flushall()
    yield client
    client.flushall()
    logging.getLogger(logs.ROOT).handlers.clear()


def run(*argv: str) -> int:
    return cli.main(list(argv), out=io.StringIO())


def events(err: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in err.splitlines() if line.strip()]


def test_scan_and_approve_log_one_json_line_per_step_without_secrets(
    env: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    auth_redis_password: str,
) -> None:
    old = uuid1_hex(int(env.time()[0]) * 1000 - 7_200_000)
    env.set(b"lock:<!channel>\xff", old)
    env.set(b"lock:b", old[:-1] + b"0")
    assert run("scan") == 1
    got = events(capsys.readouterr().err)
    assert [e["event"] for e in got] == ["scan_completed", "case_opened"]
    scan = got[0]
    assert scan["scanned"] == 2
    assert scan["findings"] == 2
    assert scan["trigger"] == "cli"
    assert scan["level"] == "info"
    assert scan["logger"] == "lockguard.scan"
    assert str(scan["redis"]).endswith(f":{env.connection_pool.connection_kwargs['port']}/0")
    case_id = str(got[1]["case_id"])
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
    assert run("approve", case_id, "--by", "ann") == 0
    err = capsys.readouterr().err
    got = events(err)
    assert [e["event"] for e in got] == ["decision", "release", "release", "case_closed"]
    keys = {e["key"] for e in got if e["event"] == "release"}
    assert keys == {"lock:<!channel>\\xff", "lock:b"}  # binary bytes escaped, as everywhere
    assert {e["outcome"] for e in got if e["event"] == "release"} == {"released"}
    assert got[-1]["outcomes"] == {"released": 2}
    assert auth_redis_password not in err
    assert old.decode() not in err  # tokens are never logged


def test_text_format_and_the_quiet_default(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env.set(b"lock:a", b"tok", px=60_000)
    monkeypatch.setenv("LOCKGUARD_LOG_FORMAT", "TEXT")
    assert run("scan") == 0
    (line,) = capsys.readouterr().err.splitlines()
    assert " info scan_completed trigger=cli " in line
    assert " scanned=1 " in line
    monkeypatch.delenv("LOCKGUARD_LOG_LEVEL")
    assert run("scan") == 0
    assert capsys.readouterr().err == ""  # a healthy CLI run says nothing on stderr


@pytest.mark.parametrize(
    ("name", "value"), [("LOCKGUARD_LOG_LEVEL", "loud"), ("LOCKGUARD_LOG_FORMAT", "xml")]
)
def test_bad_log_settings_are_named(
    env: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    value: str,
) -> None:
    monkeypatch.setenv(name, value)
    assert run("scan") == 2
    assert name in capsys.readouterr().err


def test_secrets_are_scrubbed_from_any_line() -> None:
    stream = io.StringIO()
    logs.configure("info", "text", secrets=("s3cr3t-value",), stream=stream)
    try:
        logs.event(logs.logger("t"), "oops", detail="url redis://:s3cr3t-value@h")
        logs.configure("info", "text", stream=stream)  # again: replaced, not doubled
        logs.event(logs.logger("t"), "second")
    finally:
        logging.getLogger(logs.ROOT).handlers.clear()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert "s3cr3t" not in lines[0]
    assert "***" in lines[0]


def logged(fmt: str, name: str = "ev", secrets: tuple[str, ...] = (), **fields: object) -> str:
    """The one line `logs.event` writes in `fmt` (without its newline)."""
    stream = io.StringIO()
    logs.configure("info", fmt, secrets=secrets, stream=stream)
    try:
        logs.event(logs.logger("t"), name, **fields)
    finally:
        logging.getLogger(logs.ROOT).handlers.clear()
    text = stream.getvalue()
    assert text.endswith("\n")
    assert text.count("\n") == 1
    return text[:-1]


def raw_controls(text: str) -> list[str]:
    """Every character a terminal or a line-based reader would act on."""
    return [c for c in text if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or not c.isprintable()]


CONTROLS = [
    "\r",
    "\n",
    "\t",
    "\x1b",
    "\x00",
    "\x07",
    "\x08",
    "\x0b",
    "\x0c",
    "\x1f",
    "\x7f",
    "\x80",
    "\x85",
    "\x9b",
    "\x9f",
    "\u2028",
    "\u202e",
]


@pytest.mark.parametrize("ch", CONTROLS, ids=[f"U+{ord(c):04X}" for c in CONTROLS])
@pytest.mark.parametrize("where", ["value", "event", "key"])
def test_text_format_escapes_every_control_character_in_every_field(ch: str, where: str) -> None:
    hostile = f"LG-1{ch}[2K level=error event=forged"
    if where == "value":
        line = logged("text", "reject_modal_not_opened", case_id=hostile, error="x")
        field = line.split(" case_id=", 1)[1].removesuffix(" error=x")
    elif where == "event":
        line = logged("text", hostile, error="x")
        field = line.split(" ", 2)[2].removesuffix(" error=x")
    else:
        line = logged("text", "ev", **{hostile: "x"})
        field = line.split(" ev ", 1)[1].removesuffix("=x")
    assert raw_controls(line) == []
    assert json.dumps(ch)[1:-1] in field  # `\r`, `\u001b`, ...: readable, as JSON writes it
    assert json.loads(field) == hostile  # the field reads back as exactly what came in


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("plain", "v=plain"),
        ("", 'v=""'),
        ("two words", 'v="two words"'),
        ('say "hi"', 'v="say \\"hi\\""'),
        ("a=b", 'v="a=b"'),
        ("back\\slash", 'v="back\\\\slash"'),
        ("café", "v=café"),  # printable text stays readable
        ("\x1b[2K\rok", 'v="\\u001b[2K\\rok"'),
        (3, "v=3"),
        (True, "v=true"),
        (None, "v=null"),
        ({"released": 2}, 'v={"released":2}'),
        (["a b", "\r"], 'v="[\\"a b\\",\\"\\\\r\\"]"'),
    ],
)
def test_text_format_fields(value: object, shown: str) -> None:
    assert logged("text", v=value).endswith(" " + shown)


def test_a_library_sentence_stays_a_readable_event() -> None:
    assert logged("text", "The connection has been closed").endswith(
        " info The connection has been closed"
    )
    assert logged("text", 'said "x"').endswith(' info "said \\"x\\""')


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("a" * 200, "a" * 200),
        ("a" * 1000, "a" * 200 + "…(+800)"),
        ("a b" * 100, '"' + ("a b" * 67)[:200] + '…(+100)"'),
        ("\x1b" * 1000, '"' + "\\u001b" * 33 + "…(+967)" + '"'),
        (["x" * 300], ('["' + "x" * 200 + '…(+100)"]')[:200] + "…(+11)"),  # each item, then all
        (["\x85"], '"[\\"\\u0085\\"]"'),
    ],
)
def test_text_format_cuts_every_value(value: object, shown: str) -> None:
    assert logged("text", v=value).endswith(" v=" + shown)
    assert len(logged("text", "e" * 5000)) < 300  # the event name too


def test_json_format_cuts_every_value_and_keeps_its_type() -> None:
    line = logged(
        "json",
        "e" * 500,
        s="x" * 1000,
        n=7,
        ok=False,
        none=None,
        d={"k" * 300: "v" * 300, "n": 1},
        big=list(range(80)),
        ctl="\r\x1b[2K",
    )
    assert raw_controls(line) == []
    got = json.loads(line)
    assert got["event"] == "e" * logs.VALUE_LIMIT + "…(+300)"
    assert got["s"] == "x" * logs.VALUE_LIMIT + "…(+800)"
    assert (got["n"], got["ok"], got["none"]) == (7, False, None)
    assert got["d"] == {"k" * 200 + "…(+100)": "v" * 200 + "…(+100)", "n": 1}
    assert got["big"] == [*range(logs.VALUE_ITEMS), f"…(+{80 - logs.VALUE_ITEMS} items)"]
    assert got["ctl"] == "\r\x1b[2K"  # escaped by JSON, read back exactly
    assert len(line) < 3000


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_secret_across_the_cut_is_still_scrubbed(fmt: str) -> None:
    secret = "s3cr3t-value-0123456789"
    line = logged(fmt, secrets=(secret,), detail="a" * 190 + secret + "b" * 500)
    assert "s3cr3t" not in line
    assert "***" in line


def test_a_hostile_button_value_reaches_the_log_escaped_and_cut(slack_app: Factory) -> None:
    """A signed `block_actions` click whose Reject button carries `\\r\\x1b[2K...`, into the
    running app, with Slack refusing the dialog: the line naming it is one inert line."""
    stream = io.StringIO()
    logs.configure("info", "text", stream=stream)
    try:
        app = slack_app(LOCKGUARD_APPROVERS="U0ALICE")
        app.fake.fail("views.open", "trigger_expired")
        value = "LG-1\r\x1b[2K" + "x" * 1900 + "forged"  # no space: written bare until now
        assert app.click(ids.REJECT, value).status == 200
        app.fake.wait_for("chat.postEphemeral")
    finally:
        logging.getLogger(logs.ROOT).handlers.clear()
    [line] = [ln for ln in stream.getvalue().splitlines() if "reject_modal_not_opened" in ln]
    assert all(raw_controls(ln) == [] for ln in stream.getvalue().splitlines())
    assert ' case_id="LG-1\\r\\u001b[2Kxxx' in line
    assert "forged" not in stream.getvalue()
    assert line.endswith("error=trigger_expired")
    assert len(line) < 400
