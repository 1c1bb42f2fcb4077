"""LOCKGUARD_TARGETS_FILE as a user meets it: a bad file is exit 2 naming the file, the entry and
the problem, never a password, and no Redis is touched (a socket listening where the good
entries point accepts no connection); a good file gives each target its own checked settings."""

from __future__ import annotations

import io
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bot.cli import main
from bot.compose import secrets_of
from bot.config import load_settings
from bot.core.errors import ConfigError
from bot.fleet.targets_file import load_fleet

PASSWORD = "pw-Never-Shown-4c1d9e"


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A port that listens but is never served: any connection attempt would wait in its
    backlog, where `accept` finds it."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.setblocking(False)
    yield s
    s.close()


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "orders.pw").write_text(PASSWORD + "\n")
    return tmp_path


def write(folder: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Path:
    path = folder / "targets.yaml"
    path.write_text(text)
    monkeypatch.setenv("LOCKGUARD_TARGETS_FILE", str(path))
    return path


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


GOOD = """\
  - name: orders
    url: redis://127.0.0.1:{port}/0
    password_file: orders.pw
"""

BAD = [
    # (what the file says after the good entry, what the error names)
    ("  - name: cache\n", ["targets[1] (cache)", "url: missing"]),
    ("  - name: orders\n    url: redis://127.0.0.1:1/0\n", ["targets[1] (orders)", "unique"]),
    (
        "  - name: cache\n    url: redis://127.0.0.1:1/0\n    password_file: nope.pw\n",
        ["targets[1] (cache)", "password_file: no such file", "nope.pw"],
    ),
    (
        "  - name: cache\n    url: redis://127.0.0.1:1/0\n    password_file: .\n",
        ["targets[1] (cache)", "password_file:", "is not a regular file (a folder)"],
    ),
    (
        f"  - name: cache\n    url: redis://:{PASSWORD}@127.0.0.1:1/0\n",
        ["targets[1] (cache)", "url: holds a password", "password_file"],
    ),
    (
        f"  - name: cache\n    url: redis://127.0.0.1:1/0?password={PASSWORD}\n",
        ["targets[1] (cache)", "url: holds a password"],
    ),
    (
        "  - name: cache\n    url: redis://127.0.0.1:1/0\n    patern: ['lock:*']\n",
        ["targets[1] (cache)", "patern: unknown field; did you mean patterns?"],
    ),
    (
        "  - name: cache\n    url: redis://127.0.0.1:1/0\n    tls: {ca_fil: x}\n",
        ["tls.ca_fil: unknown field; did you mean ca_file?"],
    ),
    ("  - name: Cache_1\n    url: redis://127.0.0.1:1/0\n", ["targets[1]: name: expected"]),
    ("  - name: cache\n    url: http://127.0.0.1:1/0\n", ["(cache): url: expected redis://"]),
    (
        "  - name: cache\n    url: redis://127.0.0.1:1/0\n    patterns: ['{lockguard}:*']\n",
        ["(cache): patterns: pattern '{lockguard}:*' would also match lockguard's own keys"],
    ),
    (
        "  - name: cache\n    url: redis://127.0.0.1:1/0\n    schedule: every 3 weeks\n",
        ["(cache): schedule: "],
    ),
    (
        "  - name: cache\n    url: redis://127.0.0.1:1/0\n    channel: general\n",
        ["(cache): channel: expected a Slack id"],
    ),
    (
        "  - name: cache\n    url: rediss://127.0.0.1:1/0\n    tls: {ca_file: none.pem}\n",
        ["(cache): tls.ca_file: no such file", "none.pem"],
    ),
    (
        "  - name: cache\n    url: redis://127.0.0.1:1/0\n    tls: {ca_file: orders.pw}\n",
        ["(cache): url: is redis:// (no TLS), but tls.ca_file is set: use rediss://"],
    ),
    ("  - name: cache\n    sentinels: ['127.0.0.1:1']\n", ["(cache): master: required"]),
    (
        "  - name: cache\n    cluster: true\n    url: redis://127.0.0.1:1/2\n",
        ["(cache): url: selects database 2, but a Redis Cluster has database 0 only"],
    ),
    ("  - name: cache\n    cluster: 'yes'\n    url: redis://127.0.0.1:1\n", ["cluster: expected"]),
    (
        "  - name: cache\n    url: redis://127.0.0.1:1\n    labels: {target: x, env: 1, __x: y}\n",
        ["labels: 'target' is reserved", "labels.env: expected text", "'__x' is reserved"],
    ),
    (
        "  - name: cache\n    url: redis://127.0.0.1:1\n    url: redis://127.0.0.1:2\n",
        ["YAML error at line 7, column 5", "'url' given twice"],
    ),
    ("  - name: [cache\n", ["YAML error at line"]),
    ("  - just text\n", ["targets[1]: expected a mapping"]),
]


@pytest.mark.parametrize(("tail", "expected"), BAD)
def test_a_bad_file_is_exit_2_naming_file_entry_and_problem_and_touches_no_redis(
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    listener: socket.socket,
    tail: str,
    expected: list[str],
) -> None:
    port = listener.getsockname()[1]
    path = write(folder, monkeypatch, "targets:\n" + GOOD.format(port=port) + tail)
    code, out = run("scan", "--json")
    err = capsys.readouterr().err
    assert code == 2
    assert out == ""
    assert str(path) in err
    for words in expected:
        assert words in err
    assert PASSWORD not in err
    with pytest.raises(BlockingIOError):
        listener.accept()  # nobody tried to connect


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("/proc/self/environ", "is under /proc: expected a regular file"),
        ("environ.pw", "is under /proc: expected a regular file"),  # a link there
        ("pw.fifo", "is not a regular file (a FIFO)"),
        ("/dev/zero", "is under /dev: expected a regular file"),
        ("big.pw", "is 4097 bytes, over the 4096 accepted"),
        ("nul.pw", "holds control characters"),
    ],
)
def test_a_password_file_must_be_a_small_regular_file_of_one_line(
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    listener: socket.socket,
    name: str,
    said: str,
) -> None:
    """A targets entry may name a password file and the Redis it is sent to: `/proc/self/environ`
    (lockguard's tokens and secrets) would be sent to an attacker's server. Only a small regular
    file is read; a FIFO is refused at once (it hung start-up)."""
    os.mkfifo(folder / "pw.fifo")
    (folder / "environ.pw").symlink_to("/proc/self/environ")
    (folder / "big.pw").write_text("x" * 4097)
    (folder / "nul.pw").write_bytes(b"pass\x00word")
    port = listener.getsockname()[1]
    tail = f"  - name: cache\n    url: redis://127.0.0.1:{port}/0\n    password_file: {name}\n"
    write(folder, monkeypatch, "targets:\n" + GOOD.format(port=port) + tail)
    code, out = run("scan", "--json")
    err = capsys.readouterr().err
    assert (code, out) == (2, "")
    assert "targets[1] (cache): password_file:" in err
    assert said in err
    assert "SLACK" not in err
    with pytest.raises(BlockingIOError):
        listener.accept()  # nobody tried to connect


def test_yaml_nested_too_deeply_is_exit_2_naming_the_file(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(folder, monkeypatch, "targets: " + "[" * 5000 + "]" * 5000 + "\n")
    code, _ = run("scan", "--json")
    err = capsys.readouterr().err
    assert code == 2
    assert f"{path}: YAML nested too deeply" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "expected `targets:` with a list of targets"),
        ("- name: a\n", "expected `targets:`"),
        ("targets: orders\n", "targets: expected `targets:`"),
        ("targets: []\n", "targets: the list is empty"),
        ("targest:\n  - name: a\n", "targest: unknown field; did you mean targets?"),
    ],
)
def test_a_file_without_a_list_of_targets_is_exit_2(
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    text: str,
    expected: str,
) -> None:
    path = write(folder, monkeypatch, text)
    assert run("scan")[0] == 2
    err = capsys.readouterr().err
    assert str(path) in err
    assert expected in err


def test_a_missing_or_unreadable_file_is_exit_2(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOCKGUARD_TARGETS_FILE", str(folder / "nowhere.yaml"))
    assert run("cases")[0] == 2
    assert f"LOCKGUARD_TARGETS_FILE: {folder / 'nowhere.yaml'}: no such file" in (
        capsys.readouterr().err
    )
    monkeypatch.setenv("LOCKGUARD_TARGETS_FILE", str(folder))
    assert run("check")[0] == 2
    assert "is a folder" in capsys.readouterr().err
    (folder / "latin1.yaml").write_bytes(b"targets:\n  - name: caf\xe9\n")
    monkeypatch.setenv("LOCKGUARD_TARGETS_FILE", str(folder / "latin1.yaml"))
    assert run("scan")[0] == 2
    assert "not UTF-8" in capsys.readouterr().err


def test_each_target_gets_its_own_checked_settings(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        folder,
        monkeypatch,
        "targets:\n"
        + GOOD.format(port=7001)
        + "    labels: {team: payments, env: prod}\n"
        + "    schedule: every 5m\n"
        + "  - name: sessions\n    cluster: true\n    url: redis://127.0.0.1:7002\n"
        + "    patterns: ['sess:lock:*', 'bull:*:lock']\n    channel: C0SESSIONS\n"
        + "  - name: billing\n    sentinels: ['127.0.0.1:26379', '127.0.0.1:26380']\n"
        + "    master: billing\n",
    )
    monkeypatch.setenv("LOCKGUARD_LOCK_PATTERNS", "job-lock:*")
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
    monkeypatch.setenv("REDIS_HOST", "10.9.9.9")  # the environment's Redis: not used
    err = io.StringIO()
    orders, sessions, billing = load_fleet(load_settings(env_file=None), err=err)
    assert [t.name for t in (orders, sessions, billing)] == ["orders", "sessions", "billing"]
    assert orders.redis == "redis://127.0.0.1:7001/0"
    assert sessions.redis == "redis-cluster://127.0.0.1:7002"
    assert billing.redis == "sentinel://127.0.0.1:26379,127.0.0.1:26380/billing"
    assert orders.settings.patterns == [b"job-lock:*"]  # the environment's, by default
    assert sessions.settings.patterns == [b"sess:lock:*", b"bull:*:lock"]
    assert orders.label_text() == "team=payments, env=prod"
    assert (orders.schedule, sessions.schedule) == ("every 5m", "*/15 * * * *")
    assert (orders.channel, sessions.channel) == (None, "C0SESSIONS")
    assert all(not t.settings.dry_run for t in (orders, sessions, billing))
    assert PASSWORD in secrets_of(orders.settings)  # scrubbed from logs like REDIS_PASSWORD
    assert secrets_of(sessions.settings) == ()
    assert all("10.9.9.9" not in t.redis for t in (orders, sessions, billing))
    assert err.getvalue().count("\n") == 1
    assert "REDIS_HOST not used: LOCKGUARD_TARGETS_FILE names the Redis" in err.getvalue()


def test_without_a_targets_file_the_fleet_is_the_environments_redis() -> None:
    settings = load_settings(env={"REDIS_HOST": "10.1.1.1"})
    (only,) = load_fleet(settings)
    assert only.implicit
    assert only.name == "default"
    assert only.settings is settings


def test_the_loader_refuses_through_config_error(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(folder, monkeypatch, "targets:\n  - name: a\n")
    with pytest.raises(ConfigError, match=r"targets\[0\] \(a\): url: missing"):
        load_fleet(load_settings(env_file=None))


def test_without_a_targets_file_target_names_the_one_implicit_target(
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    real_redis: redis.Redis,
) -> None:
    monkeypatch.setenv("REDIS_PORT", str(real_redis.connection_pool.connection_kwargs["port"]))
    real_redis.set(b"lock:a", b"tok")
    assert run("scan", "--target", "orders")[0] == 2
    assert "the targets are: default (no LOCKGUARD_TARGETS_FILE" in capsys.readouterr().err
    code, out = run("scan", "--json", "--target", "default")
    assert code == 1
    assert "targets" not in json.loads(out)  # the one-Redis shape, as without --target


#: A value other than the default for each setting a target takes from the environment.
ENVIRONMENT = {
    "LOCKGUARD_REDIS_TIMEOUT_SECONDS": "2.5",
    "LOCKGUARD_LOCK_PATTERNS": "job:*,\\x17*",
    "LOCKGUARD_STALE_THRESHOLD_SECONDS": "60",
    "LOCKGUARD_FLAG_INFINITE_TTL": "false",
    "LOCKGUARD_SCAN_COUNT": "500",
    "LOCKGUARD_LOOSE_RECOGNITION": "true",
    "LOCKGUARD_AUTO_REMEDIATE": "false",
    "LOCKGUARD_DRY_RUN": "false",
    "LOCKGUARD_PUBLISH_RELEASE_EVENT": "false",
    "LOCKGUARD_RELEASE_CHANNEL": "reclaimed",
    "LOCKGUARD_CASE_TTL_SECONDS": "600",
    "LOCKGUARD_REJECT_SNOOZE_SECONDS": "120",
    "LOCKGUARD_LOCK_DELAY_SECONDS": "5",
    "LOCKGUARD_AUDIT_RETENTION_DAYS": "3",
    "LOCKGUARD_TARGET_CONCURRENCY": "3",
    "LOCKGUARD_LOG_LEVEL": "INFO",
    "LOCKGUARD_LOG_FORMAT": "json",
    "SLACK_BOT_TOKEN": "xoxb-fleet-test-token",
    "SLACK_SIGNING_SECRET": "fleet-signing-secret",
    "LOCKGUARD_SLACK_CHANNEL": "C012AB3CD",
    "LOCKGUARD_APPROVERS": "U012AB3CD,U045EF6GH",
    "LOCKGUARD_REQUIRED_APPROVALS": "2",
    "LOCKGUARD_CONFIRM_TYPED_ABOVE": "10",
    "SLACK_API_URL": "http://127.0.0.1:9/api/",
    "LOCKGUARD_HTTP_HOST": "0.0.0.0",
    "PORT": "3100",
    "LOCKGUARD_SCAN_SCHEDULE": "every 5m",
    "LOCKGUARD_DIGEST_SCHEDULE": "off",
    "LOCKGUARD_LEADER_LEASE_SECONDS": "20",
    "LOCKGUARD_WEBHOOK_KEY": "fleet-webhook-key-0123456789",
    "LOCKGUARD_METRICS_TOKEN": "fleet-metrics-token-0123456789",
    "LOCKGUARD_WATCHES": "job:nightly=90000",
}


def test_a_target_keeps_every_setting_of_the_environment_but_its_redis(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validated again, the environment's settings come out as they went in (no validator
    turns its own output into something else, or refuses it)."""
    write(folder, monkeypatch, "targets:\n" + GOOD.format(port=7001))
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    settings = load_settings(env_file=None)
    assert settings.model_fields_set >= {"dry_run", "watches", "webhook_key"}
    (orders,) = load_fleet(settings)
    for name in type(settings).model_fields:
        if not name.startswith("redis_") or name == "redis_timeout_seconds":
            assert getattr(orders.settings, name) == getattr(settings, name), name


def test_serve_refuses_a_targets_password_too_short_to_mask_and_never_shows_it(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "short.pw").write_text("abc12\n")
    write(
        folder,
        monkeypatch,
        "targets:\n  - name: orders\n    url: redis://127.0.0.1:1/0\n    password_file: short.pw\n",
    )
    code, _ = run("serve")
    err = capsys.readouterr().err
    assert code == 2
    assert "target orders: REDIS_PASSWORD: shorter than 8 characters" in err
    assert "abc12" not in err


def test_an_alias_is_refused_so_a_small_file_cannot_expand_into_gigabytes(
    folder: Path, monkeypatch: pytest.MonkeyPatch, listener: socket.socket
) -> None:
    """A list of aliases of one long string costs bytes in the file and megabytes (gigabytes, at
    the file's size limit) once joined: a targets file needs no alias, so none is read."""
    long = "h" * 4000
    text = (
        f"targets:\n  - name: orders\n    url: redis://127.0.0.1:{listener.getsockname()[1]}/0\n"
        f"    patterns: [&p 'lock:{long}*', *p, *p, *p]\n"
    )
    write(folder, monkeypatch, text)
    with pytest.raises(ConfigError) as exc:
        load_fleet(load_settings(env={"LOCKGUARD_TARGETS_FILE": str(folder / "targets.yaml")}))
    assert "targets.yaml: YAML error at line 4" in str(exc.value)
    assert "aliases (*name) are not allowed" in str(exc.value)
    assert long not in str(exc.value)
    with pytest.raises(BlockingIOError):
        listener.accept()  # no Redis touched
