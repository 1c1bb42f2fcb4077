"""Secrets from files (`NAME_FILE`), as a Kubernetes user who mounts a Secret sees them: the file's
one line is the setting, a trailing newline dropped; `lockguard config` says which file it came
from and masks it; NAME and NAME_FILE both set, or a file that is no one-line secret, is exit 2
naming the variable and the path and never what the file holds; the secret is scrubbed from the
logs like any other."""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.cli import main
from bot.compose import configure_logging, secrets_of
from bot.config import SECRET_FILE_VARIABLES, load_settings
from bot.core import logs
from bot.core.errors import ConfigError

TOKEN = "xoxb-Token-From-A-File-5e7d"
SECRET = "Secret-From-A-File-0123456789abc"  # long enough for the webhook key and metrics token

FIELDS = {
    "REDIS_PASSWORD": "redis_password",
    "SLACK_BOT_TOKEN": "slack_bot_token",
    "SLACK_SIGNING_SECRET": "slack_signing_secret",
    "SLACK_APP_TOKEN": "slack_app_token",
    "LOCKGUARD_WEBHOOK_KEY": "webhook_key",
    "LOCKGUARD_METRICS_TOKEN": "metrics_token",
}


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue(), capsys.readouterr().err


def secret_file(folder: Path, content: str | bytes, name: str = "token") -> str:
    path = folder / name
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    return str(path)


def refusal(env: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(env, env_file=None, err=io.StringIO())
    return str(info.value)


def test_every_secret_but_redis_url_has_a_file_variable() -> None:
    assert dict(SECRET_FILE_VARIABLES) == {name: f"{name}_FILE" for name in FIELDS}


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_a_secret_is_read_from_its_file(tmp_path: Path, name: str) -> None:
    path = secret_file(tmp_path, SECRET + "\n")
    err = io.StringIO()
    settings = load_settings({f"{name}_FILE": path}, env_file=None, err=err)
    assert getattr(settings, FIELDS[name]).get_secret_value() == SECRET
    assert err.getvalue() == ""  # no variable called unknown


@pytest.mark.parametrize(
    ("content", "value"),
    [
        (TOKEN, TOKEN),
        (TOKEN + "\n", TOKEN),
        (TOKEN + "\r\n", TOKEN),
        (" " + TOKEN + "\t\n", " " + TOKEN + "\t"),  # exactly as if SLACK_BOT_TOKEN were set
    ],
)
def test_one_trailing_newline_is_dropped_and_nothing_else(
    tmp_path: Path, content: str, value: str
) -> None:
    path = secret_file(tmp_path, content)
    settings = load_settings({"SLACK_BOT_TOKEN_FILE": path}, env_file=None)
    assert settings.slack_bot_token is not None
    assert settings.slack_bot_token.get_secret_value() == value


def test_a_kubernetes_secret_mount_is_followed_through_its_links(tmp_path: Path) -> None:
    """A mounted Secret is `token -> ..data/token`, `..data -> ..2024_01_01_00_00_00.1`."""
    mount = tmp_path / "secrets"
    version = mount / "..2024_01_01_00_00_00.1"
    version.mkdir(parents=True)
    secret_file(version, TOKEN + "\n")
    (mount / "..data").symlink_to(version.name)
    (mount / "token").symlink_to("..data/token")
    settings = load_settings({"SLACK_BOT_TOKEN_FILE": str(mount / "token")}, env_file=None)
    assert settings.slack_bot_token is not None
    assert settings.slack_bot_token.get_secret_value() == TOKEN


def test_config_names_the_file_a_secret_came_from_and_masks_it(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = secret_file(here, TOKEN + "\n")
    monkeypatch.setenv("SLACK_BOT_TOKEN_FILE", path)
    code, out, err = run(capsys, "config")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("SLACK_BOT_TOKEN "))
    assert line.split()[1] == "***"
    assert line.endswith(f"SLACK_BOT_TOKEN_FILE ({path})")
    assert "SLACK_BOT_TOKEN_FILE" not in err  # not called an unknown variable
    assert out.splitlines()[-1].startswith("1 of ")  # it counts as set

    code, out, err = run(capsys, "config", "--json")
    assert code == 0
    row = next(s for s in json.loads(out)["settings"] if s["name"] == "SLACK_BOT_TOKEN")
    assert row == {
        "name": "SLACK_BOT_TOKEN",
        "value": "***",
        "source": f"SLACK_BOT_TOKEN_FILE ({path})",
        "secret": True,
    }
    assert TOKEN not in out + err


def test_a_file_variable_in_dotenv_works_like_one_in_the_environment(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = secret_file(here, SECRET + "\n", name="metrics-token")
    (here / ".env").write_text(f"LOCKGUARD_METRICS_TOKEN_FILE={path}\n", encoding="utf-8")
    token = load_settings().metrics_token
    assert token is not None
    assert token.get_secret_value() == SECRET
    code, out, err = run(capsys, "config")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("LOCKGUARD_METRICS_TOKEN "))
    assert line.split()[1] == "***"
    assert line.endswith(f"LOCKGUARD_METRICS_TOKEN_FILE ({path})")
    assert err == ""  # LOCKGUARD_METRICS_TOKEN_FILE is no unknown LOCKGUARD_* variable
    assert SECRET not in out + err


def test_the_secret_from_a_file_is_scrubbed_from_the_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = secret_file(tmp_path, TOKEN + "\n")
    settings = load_settings({"SLACK_BOT_TOKEN_FILE": path}, env_file=None)
    assert TOKEN in secrets_of(settings)
    configure_logging(settings)
    try:
        logs.event(logs.logger("lockguard.test"), "leak", logging.WARNING, detail=f"x {TOKEN}")
        err = capsys.readouterr().err
    finally:
        logs.configure()
    assert "leak" in err
    assert TOKEN not in err


def test_both_the_variable_and_its_file_is_refused_naming_both(tmp_path: Path) -> None:
    path = secret_file(tmp_path, TOKEN)
    message = refusal({"SLACK_BOT_TOKEN": "xoxb-Inline-Value-9", "SLACK_BOT_TOKEN_FILE": path})
    assert message == (
        "invalid configuration:\n"
        "  SLACK_BOT_TOKEN (environment) and SLACK_BOT_TOKEN_FILE (environment) are both set: "
        "set only one of them"
    )


def test_both_set_across_dotenv_and_the_environment_is_exit_2(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (here / ".env").write_text("REDIS_PASSWORD=Dotenv-Password-77\n", encoding="utf-8")
    monkeypatch.setenv("REDIS_PASSWORD_FILE", secret_file(here, "File-Password-88\n"))
    code, out, err = run(capsys, "config")
    assert (code, out) == (2, "")
    assert (
        "REDIS_PASSWORD (.env) and REDIS_PASSWORD_FILE (environment) are both set: "
        "set only one of them" in err
    )
    assert "Dotenv-Password-77" not in err
    assert "File-Password-88" not in err


def test_a_blank_variable_next_to_its_file_is_unset_and_a_blank_file_variable_too(
    tmp_path: Path,
) -> None:
    path = secret_file(tmp_path, TOKEN)
    settings = load_settings({"SLACK_BOT_TOKEN": "", "SLACK_BOT_TOKEN_FILE": path}, env_file=None)
    assert settings.slack_bot_token is not None
    assert settings.slack_bot_token.get_secret_value() == TOKEN
    settings = load_settings({"SLACK_APP_TOKEN_FILE": " "}, env_file=None)
    assert settings.slack_app_token is None


def _fifo(folder: Path) -> tuple[str, str]:
    os.mkfifo(folder / "token")
    return str(folder / "token"), "is not a regular file (a FIFO)"


def _folder(folder: Path) -> tuple[str, str]:
    (folder / "token").mkdir()
    return str(folder / "token"), "is not a regular file (a folder)"


def _proc(folder: Path) -> tuple[str, str]:
    return "/proc/self/environ", "is under /proc: expected a regular file"


def _link_to_proc(folder: Path) -> tuple[str, str]:
    (folder / "token").symlink_to("/proc/self/environ")
    return str(folder / "token"), "is under /proc: expected a regular file"


def _device(folder: Path) -> tuple[str, str]:
    return "/dev/zero", "is under /dev: expected a regular file"


def _missing(folder: Path) -> tuple[str, str]:
    return str(folder / "nothing-here"), "no such file"


def _two_lines(folder: Path) -> tuple[str, str]:
    return secret_file(folder, f"{TOKEN}\nsecond-{TOKEN}\n"), "has more than one line"


def _two_newlines(folder: Path) -> tuple[str, str]:
    return secret_file(folder, f"{TOKEN}\n\n"), "has more than one line"


def _carriage_return(folder: Path) -> tuple[str, str]:
    return secret_file(folder, f"{TOKEN}\rsecond-{TOKEN}"), "has more than one line"


def _empty(folder: Path) -> tuple[str, str]:
    return secret_file(folder, ""), "is empty"


def _newline_only(folder: Path) -> tuple[str, str]:
    return secret_file(folder, "\n"), "is empty"


def _oversized(folder: Path) -> tuple[str, str]:
    return secret_file(folder, TOKEN * 200), "bytes, over the 4096 accepted"


def _not_utf8(folder: Path) -> tuple[str, str]:
    return secret_file(folder, TOKEN.encode() + b"\xff\xfe"), "is not UTF-8 text"


@pytest.mark.parametrize(
    "make",
    [
        _fifo,
        _folder,
        _proc,
        _link_to_proc,
        _device,
        _missing,
        _two_lines,
        _two_newlines,
        _carriage_return,
        _empty,
        _newline_only,
        _oversized,
        _not_utf8,
    ],
)
def test_a_file_that_is_no_one_line_secret_is_refused_naming_variable_and_path(
    tmp_path: Path, make: Callable[[Path], tuple[str, str]]
) -> None:
    path, why = make(tmp_path)
    message = refusal({"SLACK_SIGNING_SECRET_FILE": path})
    assert message.startswith("invalid configuration:\n  SLACK_SIGNING_SECRET_FILE: ")
    assert path in message
    assert why in message
    assert TOKEN not in message
    assert len(message.splitlines()) == 2


def test_every_bad_variable_is_named_at_once(tmp_path: Path) -> None:
    message = refusal(
        {
            "SLACK_BOT_TOKEN_FILE": secret_file(tmp_path, "", name="empty"),
            "LOCKGUARD_WEBHOOK_KEY_FILE": secret_file(tmp_path, "a\nb", name="two"),
            "REDIS_PORT": "abc",
        }
    )
    lines = message.splitlines()
    assert lines[0] == "invalid configuration:"
    assert any(x.startswith("  SLACK_BOT_TOKEN_FILE: ") and "is empty" in x for x in lines)
    assert any(x.startswith("  LOCKGUARD_WEBHOOK_KEY_FILE: ") for x in lines)
    assert any(x.startswith("  REDIS_PORT: ") for x in lines)


def test_a_file_value_goes_through_the_settings_checks_like_the_variable(tmp_path: Path) -> None:
    """The webhook key from a file is checked as LOCKGUARD_WEBHOOK_KEY is: too short, refused,
    and the message never quotes it."""
    message = refusal({"LOCKGUARD_WEBHOOK_KEY_FILE": secret_file(tmp_path, "short-Key\n")})
    assert "LOCKGUARD_WEBHOOK_KEY: expected at least" in message
    assert "short-Key" not in message


@pytest.mark.parametrize("command", ["config", "serve"])
def test_a_bad_secret_file_is_exit_2_before_anything_runs(
    here: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    closed_port: int,
    command: str,
) -> None:
    monkeypatch.setenv("REDIS_PORT", str(closed_port))  # never reached: refused before
    path = secret_file(here, f"{TOKEN}\nsecond line\n")
    monkeypatch.setenv("SLACK_BOT_TOKEN_FILE", path)
    code, out, err = run(capsys, command)
    assert (code, out) == (2, "")
    assert err == (
        "lockguard: error: invalid configuration:\n"
        f"  SLACK_BOT_TOKEN_FILE: {path} has more than one line: expected the secret alone on "
        "one line\n"
    )


def test_file_variables_are_known_and_their_typos_are_named() -> None:
    err = io.StringIO()
    load_settings(
        {
            "LOCKGUARD_WEBHOOK_KEY_FILE": " ",
            "lockguard_metrics_token_file": "",
            "REDIS_PASSWORD_FILE": "",
            "LOCKGUARD_METRICS_TOKEN_FIEL": "/run/secrets/metrics",
            "REDIS_URL_FILE": "/run/secrets/url",
        },
        err=err,
    )
    assert err.getvalue().splitlines() == [
        "lockguard: warning: LOCKGUARD_METRICS_TOKEN_FIEL (environment) is not a lockguard "
        "setting, ignored; did you mean LOCKGUARD_METRICS_TOKEN_FILE?",
        "lockguard: warning: REDIS_URL_FILE (environment) is not a lockguard setting, ignored; "
        "REDIS_URL is not read from a file: set REDIS_URL without its password, and "
        "REDIS_PASSWORD_FILE",
    ]
