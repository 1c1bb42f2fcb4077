"""Turning Redis failures into one-line errors that say what to do (`describe`, `redis_errors`).

Each names the endpoint, never the password; error replies are worded by `bot.store.refusals`.
All are exit 3, except settings that do not fit the server (exit 2): a database it does not have,
or REDIS_CLUSTER=true for a Redis that is not a cluster node.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeAlias

import redis
from redis.exceptions import RedisClusterException, SlotNotCoveredError
from redis.sentinel import MasterNotFoundError

from bot.core.errors import ConfigError, LockguardError, RedisRefusedError, RedisUnavailableError
from bot.store.refusals import endpoint_is_cluster, refusal

__all__ = [
    "REDIS_FAILURES",
    "RedisError",
    "RedisFailure",
    "describe",
    "endpoint_is_cluster",
    "endpoint_is_tls",
    "is_tls_failure",
    "redis_errors",
]

#: What a failure of either client raises (RedisClusterException is not a RedisError).
RedisFailure: TypeAlias = "redis.RedisError | RedisClusterException"
#: The layers above the engine catch Redis's failures by these: import-linter keeps `redis` out.
REDIS_FAILURES = (redis.RedisError, RedisClusterException)
RedisError = redis.RedisError


def endpoint_is_tls(endpoint: str) -> bool:
    return endpoint.startswith("rediss://") or "+tls://" in endpoint


@contextmanager
def redis_errors(endpoint: str, secrets: tuple[str, ...] = ()) -> Iterator[None]:
    """Every Redis failure inside as a LockguardError (`describe`)."""
    try:
        yield
    except (redis.RedisError, RedisClusterException) as exc:
        raise describe(exc, endpoint, secrets) from None


def describe(exc: RedisFailure, endpoint: str, secrets: tuple[str, ...] = ()) -> LockguardError:
    """The one-line error for a Redis failure: never a secret, nor Redis's reply beyond a code
    word and a command name (a reply can quote arguments)."""
    if isinstance(exc, RedisClusterException):
        return _cluster_failure(exc, endpoint)
    tls = _tls_failure(exc, endpoint, secrets)
    if tls is not None:
        return tls
    if isinstance(exc, MasterNotFoundError):
        return _no_primary(exc, endpoint)
    if isinstance(exc, redis.AuthenticationError):
        return _auth_failure(exc, endpoint)
    if isinstance(exc, redis.BusyLoadingError):  # a ConnectionError subclass in redis-py
        return RedisRefusedError(
            f"Redis at {endpoint} is loading its dataset into memory "
            "(LOADING); try again when it has finished"
        )
    if isinstance(exc, redis.TimeoutError):
        return RedisUnavailableError(
            f"Redis at {endpoint} timed out (no answer within LOCKGUARD_REDIS_TIMEOUT_SECONDS; "
            "is it up, and is this its address?)"
        )
    if isinstance(exc, redis.InvalidResponse):  # something answered, not in Redis's protocol
        return RedisUnavailableError(
            f"{endpoint} did not answer as Redis does: is that the Redis port (REDIS_URL, "
            "REDIS_PORT), or does it serve TLS (rediss://)?"
        )
    if isinstance(exc, redis.ConnectionError):
        text = _scrub(str(exc), secrets)
        if not endpoint_is_tls(endpoint) and (
            "reset by peer" in text or "Connection closed by server" in text
        ):
            text += " (if that port serves TLS only, use rediss:// and REDIS_TLS_CA_FILE)"
        return RedisUnavailableError(f"cannot reach Redis at {endpoint}: {text}")
    if isinstance(exc, redis.ResponseError):
        return refusal(exc, endpoint, lambda text: _scrub(text, secrets))
    return RedisUnavailableError(f"Redis at {endpoint}: the request failed ({type(exc).__name__})")


#: Redis's answer to a client that sent no password to a server that needs one: NOAUTH on a
#: command (RESP2), or the refused HELLO that redis-py sends first.
_NO_PASSWORD_SENT = ("NOAUTH", "Authentication required", "called with the client already authent")


def _auth_failure(exc: redis.AuthenticationError, endpoint: str) -> LockguardError:
    if any(words in str(exc) for words in _NO_PASSWORD_SENT):
        return RedisUnavailableError(
            f"Redis at {endpoint} needs a password (NOAUTH), and none was sent: set "
            "REDIS_PASSWORD (or user:password in REDIS_URL for an ACL user)"
        )
    return RedisUnavailableError(
        f"Redis at {endpoint} refused the credentials (check REDIS_PASSWORD, or the "
        "user:password in REDIS_URL)"
    )


def is_tls_failure(exc: BaseException) -> bool:
    """A failure of the TLS layer, whatever redis-py wrapped it in."""
    return _ssl_cause(exc) is not None or "CERTIFICATE_VERIFY_FAILED" in str(exc)


def _ssl_cause(exc: BaseException) -> BaseException | None:
    """The ssl error (or TLS handshake timeout) redis-py wrapped into a ConnectionError."""
    seen: BaseException | None = exc
    for _ in range(5):
        seen = (seen.__cause__ or seen.__context__) if seen is not None else None
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLError) or "handshake operation timed out" in str(seen):
            return seen
    return None


def _tls_failure(
    exc: redis.RedisError, endpoint: str, secrets: tuple[str, ...]
) -> LockguardError | None:
    cause = _ssl_cause(exc)
    text = str(exc)
    if cause is None and "CERTIFICATE_VERIFY_FAILED" not in text:
        return None
    if isinstance(cause, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in text:
        why = getattr(cause, "verify_message", "") or text.split("certificate verify failed:")[-1]
        why = _scrub(str(why).split(" (_ssl.c")[0].strip().rstrip("."), secrets)
        return RedisUnavailableError(
            f"TLS: the certificate of Redis at {endpoint} did not verify against "
            f"REDIS_TLS_CA_FILE (the system's CA certificates when it is unset): {why}"
        )
    if cause is not None and not isinstance(cause, ssl.SSLError):
        return RedisUnavailableError(
            f"TLS: Redis at {endpoint} did not answer the TLS handshake in time (does that port "
            "serve TLS? a plain-text port does not answer one)"
        )
    reason = str(getattr(cause, "reason", "") or "")
    if "CERTIFICATE_REQUIRED" in reason or isinstance(cause, ssl.SSLEOFError):
        return RedisUnavailableError(
            f"TLS: Redis at {endpoint} closed the connection during the handshake: it requires a "
            "client certificate (REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE) or did not accept "
            "the one given"
        )
    if "ALERT" in reason and ("CERTIFICATE" in reason or "UNKNOWN_CA" in reason):
        # the server's alert about the certificate the client offered
        return RedisUnavailableError(
            f"TLS: Redis at {endpoint} did not accept the client certificate "
            f"(REDIS_TLS_CERT_FILE): {reason}"
        )
    if "WRONG_VERSION_NUMBER" in reason or "RECORD_LAYER" in reason or "PACKET_LENGTH" in reason:
        return RedisUnavailableError(
            f"TLS: Redis at {endpoint} does not speak TLS on that port ({reason})"
        )
    return RedisUnavailableError(
        f"TLS: the TLS connection to Redis at {endpoint} failed ({reason or type(cause).__name__})"
    )


_SENTINEL_DOWN = re.compile(r" - [\w:.]*(?:ConnectionError|TimeoutError)\b")


def _no_primary(exc: MasterNotFoundError, endpoint: str) -> LockguardError:
    text = str(exc)
    # redis-py lists each sentinel that failed as "<client repr> - <error repr>"
    down = len(_SENTINEL_DOWN.findall(text))
    total = endpoint.split("://", 1)[-1].rsplit("/", 1)[0].count(",") + 1
    if down >= total:
        tls = (
            "; with TLS, their certificates must also verify against REDIS_TLS_CA_FILE"
            if endpoint_is_tls(endpoint)
            else ""
        )
        return RedisUnavailableError(
            f"cannot reach any of the sentinels at {endpoint} (REDIS_SENTINELS){tls}"
        )
    missing = f"; {down} of the {total} sentinels did not answer" if down else ""
    return RedisUnavailableError(
        f"the sentinels at {endpoint} name no healthy primary for REDIS_SENTINEL_MASTER: check the "
        "name (`sentinel monitor <name> ...`), or the primary is down and no replica has been "
        f"promoted yet{missing}"
    )


def _cluster_failure(exc: RedisClusterException, endpoint: str) -> LockguardError:
    # Never quoted: some of these messages carry the command and its arguments.
    text = str(exc)
    if "Cluster mode is not enabled" in text:
        return ConfigError(
            f"REDIS_CLUSTER=true, but Redis at {endpoint} is not a Redis Cluster node "
            "(cluster_enabled:0); unset REDIS_CLUSTER for a standalone Redis"
        )
    if isinstance(exc, SlotNotCoveredError) or "slots are covered" in text or "not covered" in text:
        return RedisUnavailableError(
            f"the Redis Cluster at {endpoint} has hash slots that no node serves; wait until "
            "CLUSTER INFO says cluster_state:ok"
        )
    if "cannot be connected" in text or "reachable node" in text:
        return RedisUnavailableError(
            f"cannot reach the Redis Cluster at {endpoint}: no node answered (REDIS_URL or "
            "REDIS_HOST / REDIS_PORT name any one of its nodes)"
        )
    return RedisUnavailableError(
        f"the Redis Cluster at {endpoint}: the request failed ({type(exc).__name__})"
    )


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    # redis-py's messages carry host:port only; cut anything that looks like a URL with userinfo.
    return text.split("\n", 1)[0][:400]
