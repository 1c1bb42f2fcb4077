"""Configuration (pure): each bad value is named with what was expected, all of them in one
message, secrets never echoed; lock patterns parsed to bytes and refused when they would match
lockguard's own keys."""

from __future__ import annotations

import pytest

from bot.config import load_settings, parse_patterns
from bot.core.errors import ConfigError

PASSWORD = "hunter2-S3cret"

# (id, env, variable named, words of what was expected)
BAD_VALUES = [
    ("port not a number", {"REDIS_PORT": "abc"}, "REDIS_PORT", "valid integer"),
    ("port out of range", {"REDIS_PORT": "70000"}, "REDIS_PORT", "less than 65536"),
    ("port zero", {"REDIS_PORT": "0"}, "REDIS_PORT", "greater than 0"),
    ("empty host", {"REDIS_HOST": "  "}, "REDIS_HOST", "expected a host name"),
    (
        "threshold below 30 s",
        {"LOCKGUARD_STALE_THRESHOLD_SECONDS": "10"},
        "LOCKGUARD_STALE_THRESHOLD_SECONDS",
        "greater than or equal to 30",
    ),
    (
        "threshold not a number",
        {"LOCKGUARD_STALE_THRESHOLD_SECONDS": "15m"},
        "LOCKGUARD_STALE_THRESHOLD_SECONDS",
        "valid integer",
    ),
    (
        "flag not a boolean",
        {"LOCKGUARD_FLAG_INFINITE_TTL": "maybe"},
        "LOCKGUARD_FLAG_INFINITE_TTL",
        "valid boolean",
    ),
    (
        "dry run not a boolean",
        {"LOCKGUARD_DRY_RUN": "perhaps"},
        "LOCKGUARD_DRY_RUN",
        "valid boolean",
    ),
    (
        "timeout zero",
        {"LOCKGUARD_REDIS_TIMEOUT_SECONDS": "0"},
        "LOCKGUARD_REDIS_TIMEOUT_SECONDS",
        "greater than 0",
    ),
    (
        "scan count too small",
        {"LOCKGUARD_SCAN_COUNT": "1"},
        "LOCKGUARD_SCAN_COUNT",
        "greater than or equal to 10",
    ),
    (
        "typed confirmation below 1",
        {"LOCKGUARD_CONFIRM_TYPED_ABOVE": "0"},
        "LOCKGUARD_CONFIRM_TYPED_ABOVE",
        "greater than or equal to 1",
    ),
    (
        "empty release channel",
        {"LOCKGUARD_RELEASE_CHANNEL": ""},
        "LOCKGUARD_RELEASE_CHANNEL",
        "at least 1 character",
    ),
    (
        "URL with a foreign scheme",
        {"REDIS_URL": "http://localhost:6379"},
        "REDIS_URL",
        "expected redis://",
    ),
    ("URL without a host", {"REDIS_URL": "redis://:6379/0"}, "REDIS_URL", "expected a host"),
    (
        "URL with a bad port",
        {"REDIS_URL": "redis://localhost:99999/0"},
        "REDIS_URL",
        "port number between 1 and 65535",
    ),
    (
        "URL with port 0",
        {"REDIS_URL": "redis://localhost:0/0"},
        "REDIS_URL",
        "port number between 1 and 65535",
    ),
    (
        "empty pattern",
        {"LOCKGUARD_LOCK_PATTERNS": "lock:*,,job-lock:*"},
        "LOCKGUARD_LOCK_PATTERNS",
        "empty pattern",
    ),
    (
        "pattern matching own keys",
        {"LOCKGUARD_LOCK_PATTERNS": "lock:*,*"},
        "LOCKGUARD_LOCK_PATTERNS",
        "lockguard's own keys",
    ),
    ("web port", {"PORT": "http"}, "PORT", "valid integer"),
]


@pytest.mark.parametrize(
    ("env", "name", "expected"), [pytest.param(*c[1:], id=c[0]) for c in BAD_VALUES]
)
def test_bad_value_is_named_with_what_was_expected(
    env: dict[str, str], name: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env)
    message = str(info.value)
    assert f"{name}:" in message
    assert expected in message
    assert info.value.exit_code == 2


def test_every_bad_value_in_one_message() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(
            {
                "REDIS_PORT": "abc",
                "LOCKGUARD_STALE_THRESHOLD_SECONDS": "5",
                "LOCKGUARD_FLAG_INFINITE_TTL": "maybe",
                "LOCKGUARD_LOCK_PATTERNS": "*",
            }
        )
    message = str(info.value)
    for name in (
        "REDIS_PORT",
        "LOCKGUARD_STALE_THRESHOLD_SECONDS",
        "LOCKGUARD_FLAG_INFINITE_TTL",
        "LOCKGUARD_LOCK_PATTERNS",
    ):
        assert f"  {name}:" in message
    assert len(message.splitlines()) == 5  # heading + one line per variable


def test_the_bad_value_is_shown_for_ordinary_settings() -> None:
    with pytest.raises(ConfigError, match="got 'abc'"):
        load_settings({"REDIS_PORT": "abc"})


def test_names_come_from_the_real_environment_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_PORT", "abc")
    monkeypatch.setenv("LOCKGUARD_STALE_THRESHOLD_SECONDS", "5")
    with pytest.raises(ConfigError) as info:
        load_settings(env_file=None)
    assert "REDIS_PORT:" in str(info.value)
    assert "LOCKGUARD_STALE_THRESHOLD_SECONDS:" in str(info.value)


# Each of these has the password inside the bad value.
SECRET_BAD_VALUES = [
    ("foreign scheme", {"REDIS_URL": f"http://:{PASSWORD}@localhost:6379"}),
    ("bad port", {"REDIS_URL": f"redis://user:{PASSWORD}@localhost:99999/0"}),
    ("no host", {"REDIS_URL": f"redis://:{PASSWORD}@:6379/0"}),
    ("broken IPv6", {"REDIS_URL": f"redis://:{PASSWORD}@[::1/0"}),
    ("netloc that changes under NFKC", {"REDIS_URL": f"redis://:{PASSWORD}\u2100@localhost/0"}),
    ("port not a number", {"REDIS_URL": f"redis://:{PASSWORD}@localhost:{PASSWORD}/0"}),
    (
        "password next to other bad values",
        {"REDIS_PASSWORD": PASSWORD, "REDIS_PORT": "x", "REDIS_URL": f"ftp://:{PASSWORD}@h"},
    ),
    (
        "Slack secrets next to a bad value",
        {"SLACK_BOT_TOKEN": PASSWORD, "SLACK_SIGNING_SECRET": PASSWORD, "REDIS_PORT": "x"},
    ),
]


@pytest.mark.parametrize("env", [pytest.param(c[1], id=c[0]) for c in SECRET_BAD_VALUES])
def test_password_never_appears_in_the_message(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env)
    assert PASSWORD not in str(info.value)
    assert "REDIS_" in str(info.value)


# (id, LOCKGUARD_LOCK_PATTERNS, patterns as bytes)
GOOD_PATTERNS = [
    ("default", "lock:*", [b"lock:*"]),
    (
        "several, spaces trimmed",
        " lock:* , job-lock:* ,mutex:*",
        [b"lock:*", b"job-lock:*", b"mutex:*"],
    ),
    ("Stalwart byte prefix", "\\x17*", [b"\x17*"]),
    ("several byte prefixes", "\\x15*,\\x17*,\\x19*", [b"\x15*", b"\x17*", b"\x19*"]),
    ("upper-case hex", "\\xFF*", [b"\xff*"]),
    ("a glob byte named by \\x is literal", "lock:\\x2a", [b"lock:\\*"]),
    ("duplicates dropped", "lock:*,lock:*", [b"lock:*"]),
    ("BullMQ", "bull:*:lock", [b"bull:*:lock"]),
    ("unicode", "verrou:é*", ["verrou:é*".encode()]),
    ("a name that only starts like the prefix", "lockguard", [b"lockguard"]),
]


@pytest.mark.parametrize(
    ("text", "patterns"), [pytest.param(*c[1:], id=c[0]) for c in GOOD_PATTERNS]
)
def test_patterns_parse_to_bytes(text: str, patterns: list[bytes]) -> None:
    assert parse_patterns(text) == patterns
    assert load_settings({"LOCKGUARD_LOCK_PATTERNS": text}).patterns == patterns


@pytest.mark.parametrize(
    "text",
    [
        "*",
        "lock*",
        "l*",
        "lockguard:*",
        "lockguard:leases:*",
        "lockguard:scan:lease",
        "?*",
        "[l]ock:*",
        "lo?kguard:*",
        "lockguard\\x3a*",
        "lock:*,lockg*",
        "{lockguard}:*",
        "{lock*",
        "{lockguard}:leases:gen",
        "\\x7blockguard}*",
    ],
)
def test_patterns_that_could_match_own_keys_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="lockguard's own keys"):
        parse_patterns(text)
    with pytest.raises(ConfigError, match="LOCKGUARD_LOCK_PATTERNS"):
        load_settings({"LOCKGUARD_LOCK_PATTERNS": text})


# (pattern, the prefix the refusal must name, a prefix it must not name)
CLASHES = [
    ("lock*", "under lockguard:* (its old key format's", "{lockguard}:*"),
    ("lockguard:leases:*", "under lockguard:* (its old key format's", "{lockguard}:*"),
    ("{lockguard}:*", "under {lockguard}:*;", "lockguard:* ("),
    ("{lockguard:*", "under {lockguard:* (the keys it keeps in a lock's own Redis Cluster", "}:*"),
]


@pytest.mark.parametrize(("text", "named", "not_named"), CLASHES)
def test_the_refusal_names_the_prefix_the_pattern_really_clashes_with(
    text: str, named: str, not_named: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"LOCKGUARD_LOCK_PATTERNS": text})
    message = str(info.value)
    assert f"LOCKGUARD_LOCK_PATTERNS: pattern '{text}' would also match lockguard's own keys" in (
        message
    )
    assert named in message
    assert not_named not in message.split("narrow it")[0]


def test_a_pattern_matching_every_prefix_names_them_all() -> None:
    with pytest.raises(ValueError, match="would also match") as info:
        parse_patterns("*")
    assert "under {lockguard}:*, lockguard:* (its old key format's" in str(info.value)
    assert "and {lockguard:* (the keys it keeps" in str(info.value)


@pytest.mark.parametrize(
    ("text", "escape"),
    [
        ("\\xZZ*", "\\xZZ"),
        ("lock:\\x4", "\\x4"),
        ("lock:*,job:\\xg1*", "\\xg1"),
        ("lock:\\x", "\\x"),
        ("lock:\\X41*", None),  # not an escape: `\X` is the literal X, as in Redis
    ],
)
def test_broken_escapes_are_refused_naming_the_variable_and_the_escape(
    text: str, escape: str | None
) -> None:
    if escape is None:
        assert parse_patterns(text) == [b"lock:\\X41*"]
        return
    with pytest.raises(ConfigError) as info:
        load_settings({"LOCKGUARD_LOCK_PATTERNS": text})
    message = str(info.value)
    assert f"LOCKGUARD_LOCK_PATTERNS: pattern '{text.split(',')[-1]}' has a broken escape" in (
        message
    )
    assert f"broken escape '{escape}': expected \\xHH with two hex digits" in message
    assert info.value.exit_code == 2


def test_defaults() -> None:
    s = load_settings({})
    assert s.patterns == [b"lock:*"]
    assert s.stale_threshold_seconds == 900
    assert s.flag_infinite_ttl is True
    assert s.dry_run is True
    assert s.endpoint == "redis://localhost:6379/0"


# (id, env, endpoint)
ENDPOINTS = [
    ("host and port", {"REDIS_HOST": "10.0.0.5", "REDIS_PORT": "6380"}, "redis://10.0.0.5:6380/0"),
    (
        "URL with password",
        {"REDIS_URL": f"redis://:{PASSWORD}@cache.internal:6390/2"},
        "redis://cache.internal:6390/2",
    ),
    (
        "URL with user and password",
        {"REDIS_URL": f"rediss://bot:{PASSWORD}@cache:6390"},
        "rediss://cache:6390/0",
    ),
    (
        "URL with password in the query",
        {"REDIS_URL": f"redis://cache/1?password={PASSWORD}"},
        "redis://cache:6379/1",
    ),
    (
        "unix socket with password",
        {"REDIS_URL": f"unix://:{PASSWORD}@/run/redis.sock"},
        "unix:/run/redis.sock",
    ),
    (
        "URL wins over host",
        {"REDIS_URL": f"redis://:{PASSWORD}@a:1/0", "REDIS_HOST": "b"},
        "redis://a:1/0",
    ),
]


@pytest.mark.parametrize(("env", "endpoint"), [pytest.param(*c[1:], id=c[0]) for c in ENDPOINTS])
def test_endpoint_never_contains_the_password(env: dict[str, str], endpoint: str) -> None:
    s = load_settings({**env, "REDIS_PASSWORD": PASSWORD})
    assert s.endpoint == endpoint
    assert PASSWORD not in s.endpoint
    assert PASSWORD not in repr(s.redacted())
    assert PASSWORD not in repr(s)


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "301", "0", "-1"])
def test_redis_timeout_must_be_a_finite_number_of_seconds(value: str) -> None:
    with pytest.raises(ConfigError, match="LOCKGUARD_REDIS_TIMEOUT_SECONDS"):
        load_settings({"LOCKGUARD_REDIS_TIMEOUT_SECONDS": value})


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"LOCKGUARD_REJECT_SNOOZE_SECONDS": "10"}, "LOCKGUARD_REJECT_SNOOZE_SECONDS"),
        ({"LOCKGUARD_LOOSE_RECOGNITION": "maybe"}, "LOCKGUARD_LOOSE_RECOGNITION"),
    ],
)
def test_recognition_and_snooze_settings_are_checked(env: dict[str, str], name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        load_settings(env)


def test_the_reclaim_config_judges_with_the_scans_policy() -> None:
    s = load_settings(
        {"LOCKGUARD_STALE_THRESHOLD_SECONDS": "60", "LOCKGUARD_LOOSE_RECOGNITION": "true"}
    )
    cfg = s.reclaim_config()
    assert cfg.policy == s.scan_options().policy
    assert cfg.policy.stale_threshold_ms == 60_000
    assert cfg.policy.loose_recognition
    assert cfg.reject_snooze_ms == 86_400_000


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({}, ["SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "LOCKGUARD_SLACK_CHANNEL"]),
        (
            {
                "SLACK_BOT_TOKEN": "xoxp-user-token",
                "SLACK_SIGNING_SECRET": "s",
                "LOCKGUARD_SLACK_CHANNEL": "C0INCIDENT",
            },
            ["SLACK_BOT_TOKEN"],
        ),
        (
            {
                "SLACK_BOT_TOKEN": "xoxb-1",
                "SLACK_APP_TOKEN": "xoxb-2",
                "LOCKGUARD_SLACK_CHANNEL": "C0INCIDENT",
            },
            ["SLACK_APP_TOKEN"],
        ),
        (
            {
                "SLACK_BOT_TOKEN": "xoxb-1",
                "SLACK_SIGNING_SECRET": "s",
                "SLACK_API_URL": "slack.com",
                "LOCKGUARD_SLACK_CHANNEL": "C0INCIDENT",
            },
            ["SLACK_API_URL"],
        ),
        (
            {
                "SLACK_BOT_TOKEN": "xoxb-1",
                "SLACK_APP_TOKEN": "xapp-1",
                "LOCKGUARD_SLACK_CHANNEL": "C0INCIDENT",
            },
            [],
        ),  # Socket Mode needs no signing secret
    ],
)
def test_serve_names_each_missing_or_bad_slack_setting(
    env: dict[str, str], named: list[str]
) -> None:
    problems = load_settings(env, env_file=None).slack_problems()
    assert [p.split(":")[0] for p in problems] == named
    assert not any("xoxp-user-token" in p for p in problems)
