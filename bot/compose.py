"""The composition root: settings in, a wired Engine out; every entry point builds its Engine
here, so all share one client, one scan policy and one reclaim configuration."""

from __future__ import annotations

from typing import cast

import redis

from bot.config import Settings
from bot.core import logs
from bot.engine import Engine
from bot.store.connection import make_client


def secrets_of(settings: Settings) -> tuple[str, ...]:
    """Every secret value the settings hold: scrubbed from logs and messages."""
    held = tuple(
        s.get_secret_value()
        for s in (
            settings.redis_password,
            settings.slack_bot_token,
            settings.slack_signing_secret,
            settings.slack_app_token,
            settings.webhook_key,
            settings.metrics_token,
        )
        if s is not None
    )
    return held + ((settings.url_password,) if settings.url_password else ())


def configure_logging(settings: Settings, more_secrets: tuple[str, ...] = ()) -> None:
    """Logging as the settings say, their secrets and `more_secrets` (a fleet's passwords)
    scrubbed."""
    held = secrets_of(settings)
    logs.configure(
        settings.log_level,
        settings.log_format,
        held + tuple(s for s in more_secrets if s not in held),
    )


def build_engine(settings: Settings) -> Engine:
    # One server, a Cluster or a Sentinel primary: the Engine is typed for redis.Redis, whose
    # commands RedisCluster also speaks.
    client = cast(redis.Redis, make_client(settings))
    return Engine(
        client,
        settings.scan_options(),
        settings.reclaim_config(),
        endpoint=settings.endpoint,
        secrets=secrets_of(settings),
        auto_remediate=settings.auto_remediate,
    )
