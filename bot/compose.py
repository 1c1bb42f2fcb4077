"""The composition root: settings in, a wired Engine out. Nothing is built at import time.

Every entry point (the CLI; `serve` with Slack, the scheduler and the webhook, wired in
`bot.serve.operations`) builds its Engine here, so they all share one client, one scan policy
and one reclaim configuration.
"""

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
    """Logging as the settings say, every secret they hold scrubbed, and `more_secrets` (a
    fleet's: each target's password, `bot.fleet.results.fleet_secrets`)."""
    held = secrets_of(settings)
    logs.configure(
        settings.log_level,
        settings.log_format,
        held + tuple(s for s in more_secrets if s not in held),
    )


def build_engine(settings: Settings) -> Engine:
    # One server, a Redis Cluster or a Sentinel-managed primary (`bot.store.connection.make_client`;
    # `is_cluster(engine.client)` tells a cluster apart). The Engine is typed for redis.Redis,
    # whose commands RedisCluster also speaks.
    client = cast(redis.Redis, make_client(settings))
    return Engine(
        client,
        settings.scan_options(),
        settings.reclaim_config(),
        endpoint=settings.endpoint,
        secrets=secrets_of(settings),
        auto_remediate=settings.auto_remediate,
    )
