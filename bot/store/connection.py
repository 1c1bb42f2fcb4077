"""Building the Redis client from settings: one server, a Redis Cluster or Sentinel, TLS with any.

Sentinel: after a failover the next connection goes to the new primary, no restart. TLS always
verifies the server's certificate and host name: a failure is exit 3, never plain text. The
client is byte-safe (`decode_responses=False`), and the password only travels inside it.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.connection import SSLConnection
from redis.exceptions import NoScriptError, RedisClusterException
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelManagedConnection

from bot.store.redis_errors import (
    RedisFailure,
    describe,
    endpoint_is_cluster,
    endpoint_is_tls,
    redis_errors,
)
from bot.store.redis_target import RedisTarget
from bot.store.slots import is_cluster

# What other modules import from here; the error half lives in `bot.store.redis_errors`.
__all__ = [
    "Client",
    "RedisFailure",
    "describe",
    "endpoint_is_cluster",
    "endpoint_is_tls",
    "is_cluster",
    "make_client",
    "redis_errors",
    "tls_options",
]

#: On a `RedisCluster` a script's or a transaction's keys must share one hash slot.
Client: TypeAlias = "redis.Redis | RedisCluster"


def make_client(settings: RedisTarget) -> Client:
    """The client for the configured mode. No I/O, except that RedisCluster reads the slot map at
    once (an unreachable cluster is exit 3 here)."""
    password = settings.redis_password.get_secret_value() if settings.redis_password else None
    timeouts: dict[str, Any] = {
        "socket_timeout": settings.redis_timeout_seconds,
        "socket_connect_timeout": settings.redis_timeout_seconds,
    }
    common: dict[str, Any] = {**timeouts, "decode_responses": False}
    if password is not None:
        common["password"] = password
    tls = tls_options(settings)
    if settings.mode == "sentinel":
        return _sentinel_client(settings, timeouts, common, tls)
    if settings.mode == "cluster":
        return _cluster_client(settings, common, tls)
    kwargs = {**common, "retry": _retry(), **tls}
    if settings.redis_url:
        # A password in the URL wins over REDIS_PASSWORD (redis-py: the URL's options win).
        return redis.Redis.from_url(settings.redis_url, **kwargs)
    return redis.Redis(
        host=settings.redis_host, port=settings.redis_port, ssl=settings.tls, **kwargs
    )


def tls_options(settings: RedisTarget) -> dict[str, Any]:
    """redis-py's TLS options (empty without TLS): the server's certificate and host name must
    verify against REDIS_TLS_CA_FILE (else the system's CAs)."""
    if not settings.tls:
        return {}
    return {
        "ssl_ca_certs": settings.redis_tls_ca_file,
        "ssl_certfile": settings.redis_tls_cert_file,
        "ssl_keyfile": settings.redis_tls_key_file,
        "ssl_cert_reqs": "required",
        "ssl_check_hostname": True,
    }


def _retry() -> Retry:
    # One immediate retry, on a connection error only (a dropped pooled connection, a demoted
    # primary): a down Redis fails at once. A timeout is never retried: the wait is
    # LOCKGUARD_REDIS_TIMEOUT_SECONDS, not twice it.
    return Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,))


class _PrimaryConnection(SentinelManagedConnection):
    """A connection to the primary the sentinels name, also when it reconnects inside a retry:
    redis-py reconnects a dropped one in `send_packed_command`, to the old primary (redis-py
    issue 3874); connecting through `connect()` asks the sentinels first."""

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not self._sock:
            SentinelManagedConnection.connect(self)
        SentinelManagedConnection.send_packed_command(self, command, check_health)


class _PrimarySSLConnection(_PrimaryConnection, SSLConnection):
    pass


class _PrimaryRedis(redis.Redis):
    """The Sentinel-managed client keeps each script it loaded: a failover between redis-py's
    load and call gives a second NOSCRIPT, so here an unknown EVALSHA of a known script is
    loaded and sent once more (safe: a script the server did not know did not run)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._script_bodies: dict[str, Any] = {}

    def execute_command(self, *args: Any, **options: Any) -> Any:
        name = str(args[0]).upper() if args else ""
        if name == "SCRIPT LOAD" and len(args) == 2:
            sha = redis.Redis.execute_command(self, *args, **options)
            self._script_bodies[_text(sha)] = args[1]
            return sha
        try:
            return redis.Redis.execute_command(self, *args, **options)
        except NoScriptError:
            body = self._script_bodies.get(_text(args[1])) if name == "EVALSHA" else None
            if body is None:
                raise
            redis.Redis.execute_command(self, "SCRIPT LOAD", body)
            return redis.Redis.execute_command(self, *args, **options)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _sentinel_client(
    settings: RedisTarget, timeouts: dict[str, Any], common: dict[str, Any], tls: dict[str, Any]
) -> redis.Redis:
    # With TLS the sentinels are spoken to over TLS too, with the same files. REDIS_PASSWORD is
    # the primary's; the sentinels get none.
    sentinel = Sentinel(
        settings.sentinel_addresses,
        sentinel_kwargs={**timeouts, "retry": _retry(), **({"ssl": True, **tls} if tls else {})},
    )
    connection = _PrimarySSLConnection if tls else _PrimaryConnection
    client: redis.Redis = sentinel.master_for(
        str(settings.redis_sentinel_master),
        redis_class=_PrimaryRedis,
        connection_class=connection,
        retry=_retry(),
        **common,
        **tls,
    )
    return client


def _cluster_client(
    settings: RedisTarget, common: dict[str, Any], tls: dict[str, Any]
) -> RedisCluster:
    # RedisCluster takes one retry for the whole client (it refreshes the slot map first).
    kwargs = {**common, **tls, "retry": Retry(NoBackoff(), 1)}
    try:
        if settings.redis_url:
            return RedisCluster.from_url(settings.redis_url, **kwargs)
        host, port = settings.host_port
        return RedisCluster(host=host, port=port, ssl=settings.tls, **kwargs)
    except (redis.RedisError, RedisClusterException) as exc:
        secrets = tuple(s for s in (common.get("password"), settings.url_password) if s)
        raise describe(exc, settings.endpoint, secrets) from None
