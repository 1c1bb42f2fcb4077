"""`lockguard config` and the settings' start-up warnings, as a person at a terminal sees them:
every setting with where it came from (environment, `.env`, default), secrets masked, exit 0;
unknown `LOCKGUARD_*` variables named on stderr with the closest setting; a broken pattern
escape refused (exit 2) before anything runs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bot.cli import main
from bot.config import load_settings

SIGNING = "Signing-Secret-From-Dotenv-9f"
PASSWORD = "Url-Password-In-Env-3c"
TOKEN = "xoxb-Token-In-Env-77aa"


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue(), capsys.readouterr().err


def columns(out: str) -> dict[str, tuple[str, str]]:
    """VARIABLE -> (VALUE, FROM) of the table."""
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].isupper() and parts[0] != "VARIABLE":
            rows[parts[0]] = (" ".join(parts[1:-1]), parts[-1])
    return rows


def setup(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (here / ".env").write_text(
        f"LOCKGUARD_STALE_THRESHOLD_SECONDS=60\nLOCKGUARD_DRY_RUN=false\n"
        f"SLACK_SIGNING_SECRET={SIGNING}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "true")  # the environment wins over .env
    monkeypatch.setenv("REDIS_URL", f"redis://bot:{PASSWORD}@cache.internal:6390/2")
    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)


def test_config_shows_each_setting_with_where_it_came_from_secrets_masked(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    setup(here, monkeypatch)
    code, out, err = run(capsys, "config")
    assert code == 0
    assert out.startswith(
        f"lockguard config: Redis redis://cache.internal:6390/2; .env file: {here / '.env'}\n"
    )
    rows = columns(out)
    assert rows["LOCKGUARD_STALE_THRESHOLD_SECONDS"] == ("60", ".env")
    assert rows["LOCKGUARD_DRY_RUN"] == ("true", "environment")
    assert rows["LOCKGUARD_LOCK_PATTERNS"] == ("lock:*", "default")
    assert rows["SLACK_SIGNING_SECRET"] == ("***", ".env")
    assert rows["SLACK_BOT_TOKEN"] == ("***", "environment")
    assert rows["SLACK_APP_TOKEN"] == ("(unset)", "default")
    assert rows["REDIS_URL"] == ("redis://bot:***@cache.internal:6390/2", "environment")
    assert out.splitlines()[-1].startswith("5 of ")
    for secret in (SIGNING, PASSWORD, TOKEN):
        assert secret not in out + err


def test_config_json_has_every_setting_with_its_source(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    setup(here, monkeypatch)
    monkeypatch.setenv("LOCKGUARD_DRYRUN", "false")
    code, out, err = run(capsys, "config", "--json")
    assert code == 0
    body = json.loads(out)
    by_name = {s["name"]: s for s in body["settings"]}
    assert by_name["LOCKGUARD_STALE_THRESHOLD_SECONDS"] == {
        "name": "LOCKGUARD_STALE_THRESHOLD_SECONDS",
        "value": 60,
        "source": ".env",
        "secret": False,
    }
    assert by_name["LOCKGUARD_DRY_RUN"]["value"] is True
    assert by_name["SLACK_SIGNING_SECRET"]["value"] == "***"
    assert by_name["SLACK_SIGNING_SECRET"]["secret"] is True
    assert by_name["REDIS_PASSWORD"]["value"] is None
    assert body["redis"] == "redis://cache.internal:6390/2"
    assert body["env_file"] == str(here / ".env")
    assert body["warnings"] == [
        "LOCKGUARD_DRYRUN (environment) is not a lockguard setting, ignored; "
        "did you mean LOCKGUARD_DRY_RUN?"
    ]
    for secret in (SIGNING, PASSWORD, TOKEN):
        assert secret not in out + err


def test_config_without_a_dotenv_says_so(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "config")
    assert code == 0
    assert f".env file: none ({here / '.env'} does not exist)" in out
    assert out.splitlines()[-1] == f"0 of {len(columns(out))} setting(s) set; the rest are defaults"


def test_unknown_lockguard_variables_are_named_with_the_closest_setting(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (here / ".env").write_text("LOCKGUARD_APROVERS=U0ALICE\nREDIS_HOSTNAME=x\n", encoding="utf-8")
    monkeypatch.setenv("LOCKGUARD_STALE_TRESHOLD_SECONDS", "30")
    monkeypatch.setenv("LOCKGUARD_NOTHING_LIKE_IT", "1")
    code, out, err = run(capsys, "config")
    assert code == 0  # a warning, not a failure
    assert columns(out)["LOCKGUARD_STALE_THRESHOLD_SECONDS"] == ("900", "default")
    assert err.splitlines() == [
        "lockguard: warning: LOCKGUARD_STALE_TRESHOLD_SECONDS (environment) is not a lockguard "
        "setting, ignored; did you mean LOCKGUARD_STALE_THRESHOLD_SECONDS?",
        "lockguard: warning: LOCKGUARD_NOTHING_LIKE_IT (environment) is not a lockguard "
        "setting, ignored; `lockguard config` lists the settings",
        "lockguard: warning: LOCKGUARD_APROVERS (.env) is not a lockguard setting, ignored; "
        "did you mean LOCKGUARD_APPROVERS?",
    ]  # REDIS_HOSTNAME: not lockguard's prefix, so maybe another program's: not named


def test_unknown_variables_never_show_a_value_and_known_ones_in_any_case_are_quiet() -> None:
    err = io.StringIO()
    load_settings(
        {
            "lockguard_dry_run": "false",
            "LOCKGUARD_SLACK_BOT_TOKEN": "xoxb-Secret-Value-Zz",
            "LOCKGUARD_BENCH_BOT_PATH": "/tmp",
        },
        err=err,
    )
    assert err.getvalue() == (
        "lockguard: warning: LOCKGUARD_SLACK_BOT_TOKEN (environment) is not a lockguard "
        "setting, ignored; did you mean SLACK_BOT_TOKEN?\n"
    )


@pytest.mark.parametrize("command", ["scan", "config"])
def test_a_broken_pattern_escape_is_exit_2_naming_the_variable_and_the_escape(
    here: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    closed_port: int,
    command: str,
) -> None:
    monkeypatch.setenv("REDIS_PORT", str(closed_port))  # never reached: refused before
    monkeypatch.setenv("LOCKGUARD_LOCK_PATTERNS", "\\xZZ*")
    code, out, err = run(capsys, command)
    assert (code, out) == (2, "")
    assert (
        "LOCKGUARD_LOCK_PATTERNS: pattern '\\xZZ*' has a broken escape '\\xZZ': expected \\xHH "
        "with two hex digits" in err
    )


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("LOCKGUARD_LISTEN_PORT", "LOCKGUARD_HTTP_PORT"),  # by meaning, not HTTP_HOST
        ("LOCKGUARD_PORT", "LOCKGUARD_HTTP_PORT"),
        ("LOCKGUARD_REDIS_URL", "REDIS_URL"),
        ("LOCKGUARD_TIMEOUT", "LOCKGUARD_REDIS_TIMEOUT_SECONDS"),
        ("LOCKGUARD_APPROVER", "LOCKGUARD_APPROVERS"),
        ("LOCKGUARD_SCHEDULE", "LOCKGUARD_SCAN_SCHEDULE"),
        ("LOCKGUARD_CHANEL", "LOCKGUARD_SLACK_CHANNEL"),  # a typo: by spelling
    ],
)
def test_an_unknown_name_is_answered_with_the_setting_it_means(typed: str, meant: str) -> None:
    err = io.StringIO()
    load_settings({typed: "1"}, err=err)
    assert err.getvalue().endswith(f"did you mean {meant}?\n"), err.getvalue()


def test_lockguard_http_port_is_the_port_and_port_still_works(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert load_settings({"LOCKGUARD_HTTP_PORT": "4000"}).port == 4000
    assert load_settings({"PORT": "4001"}).port == 4001
    assert load_settings({"PORT": "4002", "LOCKGUARD_HTTP_PORT": "4002"}).port == 4002
    monkeypatch.setenv("LOCKGUARD_HTTP_PORT", "4000")
    code, out, err = run(capsys, "config")
    assert code == 0
    assert "LOCKGUARD_HTTP_PORT" not in err  # known: no warning
    assert columns(out)["PORT"] == ("4000 environment", "(LOCKGUARD_HTTP_PORT)")
    monkeypatch.setenv("PORT", "5000")
    code, _, err = run(capsys, "config")
    assert code == 2
    assert "LOCKGUARD_HTTP_PORT and PORT are both set, to different values" in err


def test_with_no_redis_configured_a_command_says_where_it_connects(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run outside the checkout (no .env), lockguard says it uses the default, localhost:6379,
    instead of talking to whatever Redis answers there without a word."""
    _code, _, err = run(capsys, "check")
    note = err.splitlines()[0]
    assert note.startswith("lockguard: note: no Redis configured")
    assert f"no .env in {here}" in note
    assert "using the default, redis://localhost:6379/0" in note
    _code, _, err = run(capsys, "config")  # shows the endpoint and every source already
    assert "note:" not in err
    monkeypatch.setenv("REDIS_URL_FILE", "/run/secrets/url")  # ignored: says nothing of where
    _code, _, err = run(capsys, "check")
    assert "REDIS_URL_FILE (environment) is not a lockguard setting, ignored" in err
    assert "lockguard: note: no Redis configured" in err
    monkeypatch.setenv("REDIS_PORT", "1")  # anything saying where: no note
    run(capsys, "check")
    assert "note:" not in capsys.readouterr().err


def test_a_redis_url_beside_redis_host_says_which_one_is_used(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """compose.yaml sets the bundled Redis; a REDIS_URL left in .env used to win silently."""
    (here / ".env").write_text("REDIS_URL=redis://cache.internal:6390/0\n", encoding="utf-8")
    monkeypatch.setenv("REDIS_HOST", "redis")
    code, out, err = run(capsys, "config")
    assert code == 0
    assert "Redis redis://cache.internal:6390/0" in out
    assert (
        "lockguard: warning: REDIS_HOST (environment) is ignored: REDIS_URL (.env) says where "
        "Redis is; unset one of them"
    ) in err


@pytest.mark.parametrize(
    ("patterns", "words"),
    [
        ("lock:*;job:*", "holds ';': patterns are separated by commas ('lock:*,job:*')"),
        ("lock:* job:*", "holds ' ': patterns are separated by commas ('lock:*,job:*')"),
        ("lock:[", "opens a class with '[' that no ']' closes"),
        ("lock:[a-]:x", "opens a class with '[' that no ']' closes"),  # `a-]` is a range
    ],
)
def test_patterns_that_would_find_nothing_meant_are_refused(
    here: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    patterns: str,
    words: str,
) -> None:
    monkeypatch.setenv("LOCKGUARD_LOCK_PATTERNS", patterns)
    code, _, err = run(capsys, "scan")
    assert code == 2
    assert "LOCKGUARD_LOCK_PATTERNS" in err
    assert words in err


@pytest.mark.parametrize("patterns", ["lock:[ab]*", "lock:\\x5b*", "lock:[]]*", "a:*,b:*"])
def test_closed_classes_and_escaped_brackets_are_taken(patterns: str) -> None:
    assert load_settings({"LOCKGUARD_LOCK_PATTERNS": patterns}).patterns
