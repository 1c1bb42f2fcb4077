"""Building the Redis client from settings, and turning Redis failures into one-line errors.

The client is byte-safe (`decode_responses=False`): keys and values stay exactly as stored. Error
messages name the endpoint (host, port, db) and never the password, which only ever travels inside
the client.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from bot.errors import RedisUnavailableError
from bot.settings import Settings


def make_client(settings: Settings) -> redis.Redis:
    password = settings.redis_password.get_secret_value() if settings.redis_password else None
    common = {
        "socket_timeout": settings.redis_timeout_seconds,
        "socket_connect_timeout": settings.redis_timeout_seconds,
        "decode_responses": False,
        # One immediate retry (a pooled connection the server dropped), not redis-py's default
        # of 10 with backoff: a down Redis or a wrong password fails at once, and the timeout
        # above is what the operator configured, not eleven of it.
        "retry": Retry(NoBackoff(), 1),
    }
    if settings.redis_url:
        kwargs = dict(common)
        if password is not None:
            kwargs["password"] = password
        return redis.Redis.from_url(settings.redis_url, **kwargs)
    return redis.Redis(host=settings.redis_host, port=settings.redis_port, password=password,
                       **common)


@contextmanager
def redis_errors(endpoint: str, secrets: tuple[str, ...] = ()) -> Iterator[None]:
    """Map connection, auth and timeout failures to RedisUnavailableError (exit 3)."""
    try:
        yield
    except redis.AuthenticationError:
        raise RedisUnavailableError(
            f"Redis at {endpoint} refused the credentials (check REDIS_PASSWORD)"
        ) from None
    except redis.TimeoutError:
        raise RedisUnavailableError(f"Redis at {endpoint} timed out") from None
    except redis.ConnectionError as exc:
        raise RedisUnavailableError(
            f"cannot reach Redis at {endpoint}: {_scrub(str(exc), secrets)}"
        ) from None
    except redis.ResponseError as exc:
        text = str(exc)
        if text.startswith(("NOAUTH", "WRONGPASS", "NOPERM")):
            raise RedisUnavailableError(
                f"Redis at {endpoint} refused the request: {_scrub(text.split(' ', 1)[0], secrets)}"
                " (check REDIS_PASSWORD and the ACL user's permissions)"
            ) from None
        raise


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    # redis-py's messages carry host:port only; cut anything that looks like a URL with userinfo.
    return text.split("\n", 1)[0][:200]
