"""The Engine every entry point calls: triggers, narrowed patterns, errors as LockguardErrors."""

from __future__ import annotations

import pytest
import redis

from bot.cases.reclaim_config import ReclaimConfig
from bot.compose import build_engine
from bot.config import load_settings
from bot.core.errors import ConfigError, RedisUnavailableError
from bot.core.model import Reason
from bot.core.rules import Policy
from bot.engine import Engine
from bot.scan.result import ScanOptions

POLICY = Policy(stale_threshold_ms=1_000)


def engine(r: redis.Redis) -> Engine:
    return Engine(
        r,
        ScanOptions([b"lock:*", b"job:*"], POLICY),
        ReclaimConfig(policy=POLICY),
        endpoint="redis://test:1/0",
    )


def test_scan_records_its_trigger_and_narrows_to_a_pattern(r: redis.Redis) -> None:
    r.set(b"lock:a", b"tok")
    r.set(b"job:b", b"tok")
    e = engine(r)
    result, _ = e.scan("slash", pattern="job:*", propose=False)
    assert result.scanned == 1
    assert result.by_reason[Reason.INFINITE_TTL] == 1
    result, _ = e.scan("schedule", propose=False)
    assert result.scanned == 2
    assert e.status().last_scan["scanned"] == 2  # type: ignore[index]


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"trigger": "cron"}, "trigger"),
        ({"pattern": "lockguard:*"}, "pattern"),
        ({"pattern": ""}, "pattern"),
    ],
)
def test_bad_input_is_a_config_error_naming_it(
    r: redis.Redis, kwargs: dict[str, str], named: str
) -> None:
    kwargs = dict(kwargs)  # the parameter is shared by both backends
    trigger = kwargs.pop("trigger", "cli")
    with pytest.raises(ConfigError, match=named):
        engine(r).scan(trigger, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        ("session:*", "is not within the configured lock patterns"),
        ("lock:*,session:*", "is not within the configured lock patterns"),
        ("jo[a-]b:*", "opens a class with '\\[' that no '\\]' closes"),  # `[a-]b:*`: one class
        ("lock:" + "a" * 600, "at most 512 are accepted"),
        ("lock:" + "*?" * 9, "has 18 wildcards"),
    ],
)
def test_a_scan_wider_than_the_configured_patterns_is_refused_and_reads_nothing(
    r: redis.Redis, pattern: str, said: str
) -> None:
    r.set(b"session:abc", b"user-42")
    e = engine(r)
    with pytest.raises(ConfigError, match=said):
        e.scan("webhook", pattern=pattern)
    assert e.status().last_scan is None


def test_a_down_redis_is_a_lockguard_error_naming_the_endpoint(closed_port: int) -> None:
    settings = load_settings(
        {
            "REDIS_URL": f"redis://:s3cret@127.0.0.1:{closed_port}/0",
            "LOCKGUARD_REDIS_TIMEOUT_SECONDS": "1",
        }
    )
    e = build_engine(settings)
    for call in (e.scan, e.cases, e.status, lambda: e.approve("LG-200101-abcdef", "ann")):
        with pytest.raises(RedisUnavailableError) as info:
            call()
        assert f"127.0.0.1:{closed_port}" in str(info.value)
        assert "s3cret" not in str(info.value)
