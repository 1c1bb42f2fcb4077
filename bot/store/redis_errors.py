"""Turning Redis failures into one-line errors that say what to do (`describe`, `redis_errors`).

Each message names the endpoint (`Settings.endpoint`: mode, host, port, db) and never the
password, which only ever travels inside the client. Nor does it quote Redis's reply: a refusal
can quote a command's arguments (lock values, for one), so only its code word (`NOPERM`, `OOM`,
...) and the command's name are kept. A certificate that does not verify, a server that wants a
client certificate, sentinels that name no primary and a cluster with uncovered slots each get
their own line. All are exit 3, except settings that do not fit the server (exit 2): a database
it does not have, or REDIS_CLUSTER=true for a Redis that is not a cluster node.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeAlias

import redis
from redis.exceptions import MasterDownError, RedisClusterException, SlotNotCoveredError
from redis.sentinel import MasterNotFoundError

from bot.core.errors import ConfigError, LockguardError, RedisRefusedError, RedisUnavailableError

#: What a failure of either client raises (RedisClusterException is not a RedisError).
RedisFailure: TypeAlias = "redis.RedisError | RedisClusterException"


def endpoint_is_cluster(endpoint: str) -> bool:
    return endpoint.startswith("redis-cluster")


def endpoint_is_tls(endpoint: str) -> bool:
    return endpoint.startswith("rediss://") or "+tls://" in endpoint


@contextmanager
def redis_errors(endpoint: str, secrets: tuple[str, ...] = ()) -> Iterator[None]:
    """Turn every Redis failure (down, timed out, refused) into a LockguardError: exit 3, or
    exit 2 for a REDIS_URL that names a database the server does not have."""
    try:
        yield
    except (redis.RedisError, RedisClusterException) as exc:
        raise describe(exc, endpoint, secrets) from None


def describe(exc: RedisFailure, endpoint: str, secrets: tuple[str, ...] = ()) -> LockguardError:
    """The one-line error for a Redis failure. Never quotes Redis's reply beyond a code word and a
    command name (a reply can quote arguments), and never a secret."""
    if isinstance(exc, RedisClusterException):
        return _cluster_failure(exc, endpoint)
    tls = _tls_failure(exc, endpoint, secrets)
    if tls is not None:
        return tls
    if isinstance(exc, MasterNotFoundError):
        return _no_primary(exc, endpoint)
    if isinstance(exc, redis.AuthenticationError):
        return RedisUnavailableError(
            f"Redis at {endpoint} refused the credentials (check REDIS_PASSWORD, or the "
            "user:password in REDIS_URL)"
        )
    if isinstance(exc, redis.BusyLoadingError):  # a ConnectionError subclass in redis-py
        return RedisRefusedError(
            f"Redis at {endpoint} is loading its dataset into memory "
            "(LOADING); try again when it has finished"
        )
    if isinstance(exc, redis.TimeoutError):
        return RedisUnavailableError(f"Redis at {endpoint} timed out")
    if isinstance(exc, redis.ConnectionError):
        text = _scrub(str(exc), secrets)
        if not endpoint_is_tls(endpoint) and (
            "reset by peer" in text or "Connection closed by server" in text
        ):
            text += " (if that port serves TLS only, use rediss:// and REDIS_TLS_CA_FILE)"
        return RedisUnavailableError(f"cannot reach Redis at {endpoint}: {text}")
    if isinstance(exc, redis.ResponseError):
        return _refusal(exc, endpoint, secrets)
    return RedisUnavailableError(f"Redis at {endpoint}: the request failed ({type(exc).__name__})")


def is_tls_failure(exc: BaseException) -> bool:
    """A failure of the TLS layer (handshake, certificate), whatever redis-py wrapped it in."""
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


# redis-py strips the code word of the replies it has an exception class for; the rest keep it.
_CODE_OF_CLASS = (
    (redis.exceptions.NoPermissionError, "NOPERM"),
    (redis.exceptions.OutOfMemoryError, "OOM"),
    (redis.exceptions.ReadOnlyError, "READONLY"),
    (MasterDownError, "MASTERDOWN"),
    (redis.exceptions.ClusterDownError, "CLUSTERDOWN"),
    (redis.exceptions.MovedError, "MOVED"),
    (redis.exceptions.AskError, "ASK"),
    (redis.exceptions.TryAgainError, "TRYAGAIN"),
    (redis.exceptions.ClusterCrossSlotError, "CROSSSLOT"),
    (redis.exceptions.NoScriptError, "NOSCRIPT"),
    (redis.exceptions.ExecAbortError, "EXECABORT"),
)
_KEPT_CODES = (
    "BUSY",
    "MISCONF",
    "NOREPLICAS",
    "WRONGTYPE",
    "LOADING",
    "MASTERDOWN",
    "READONLY",
    "OOM",
    "NOPERM",
    "EXECABORT",
    "UNKILLABLE",
    "NOTBUSY",
)
_CLUSTER = ("CLUSTERDOWN", "MOVED", "ASK", "TRYAGAIN", "CROSSSLOT")
# What redis-py's pipeline puts before a command's error: the command with its arguments.
_PIPELINE = re.compile(r"Command # \d+ \((?P<cmd>[^\s)]{1,64})[^\n]*? of pipeline caused error: ")
_NAMED = re.compile(
    r"(?:to run the|unknown command|unknown subcommand) [`']"
    r"(?P<cmd>[\w|.:-]{1,40})[`']",
    re.IGNORECASE,
)
_SCRIPT = re.compile(
    r"\bscript: [0-9a-f]{40}\b|Error running script|"
    r"^The user executing the script|called from script"
)
_SHA = re.compile(r"\bscript: (?P<sha>[0-9a-f]{12})[0-9a-f]{28}\b")
_WRITES = frozenset(
    (
        "set",
        "setex",
        "psetex",
        "setnx",
        "getset",
        "getdel",
        "getex",
        "append",
        "incr",
        "incrby",
        "decr",
        "decrby",
        "hset",
        "hsetnx",
        "hmset",
        "hdel",
        "hincrby",
        "del",
        "unlink",
        "expire",
        "pexpire",
        "expireat",
        "pexpireat",
        "persist",
        "rename",
        "xadd",
        "xtrim",
        "xdel",
        "zadd",
        "zrem",
        "zremrangebyscore",
        "lpush",
        "rpush",
        "lpop",
        "rpop",
        "ltrim",
        "sadd",
        "srem",
        "multi",
        "exec",
        "watch",
    )
)
_SCRIPTING = frozenset(
    ("eval", "evalsha", "eval_ro", "evalsha_ro", "script", "script|load", "fcall", "fcall_ro")
)


def _refusal(exc: redis.ResponseError, endpoint: str, secrets: tuple[str, ...]) -> LockguardError:
    text = str(exc.args[0]) if exc.args else ""
    command = ""
    if m := _PIPELINE.match(text):
        command, text = m["cmd"].lower(), text[m.end() :]
    code = next((c for cls, c in _CODE_OF_CLASS if isinstance(exc, cls)), "")
    if not code:
        word = text.split(" ", 1)[0]
        code = word if word in _KEPT_CODES else "ERR"
    if m := _NAMED.search(text):
        command = m["cmd"].lower()
    in_script = ""
    if _SCRIPT.search(text):
        sha = _SHA.search(text)
        in_script = f" in script {sha['sha']}" if sha else " in a script"
    hint = getattr(exc, "lockguard_hint", "")
    message = _scrub(_explain(code, text, command, in_script, endpoint), secrets)
    if hint:
        message += f"; {hint}"
    if "DB index" in text and code == "ERR":
        db = endpoint.rsplit("/", 1)[-1]
        return ConfigError(
            f"REDIS_URL selects database {db}, but Redis at {endpoint} has fewer databases (its "
            "`databases` setting); choose a database index it has"
        )
    return RedisRefusedError(message)


#: Refusals whose message depends on the code alone ({at}: the endpoint, {s}: " in script ...").
_PLAIN = {
    "OOM": "Redis is out of memory (maxmemory) at {at} and refuses writes (OOM{s}): lockguard "
    "writes its own {{lockguard}}:* keys; free memory, raise maxmemory or choose an "
    "evicting maxmemory-policy",
    "READONLY": "Redis at {at} is a read-only replica; point REDIS_URL at the primary "
    "(READONLY{s})",
    "MASTERDOWN": "Redis at {at} is a replica that lost its primary and serves no data "
    "(MASTERDOWN, replica-serve-stale-data no); point REDIS_URL at the primary, or "
    "wait for the replica to resynchronize",
    "LOADING": "Redis at {at} is loading its dataset into memory (LOADING); try again when it "
    "has finished",
    "BUSY": "Redis at {at} is busy running a script or function (BUSY); try again when it has "
    "finished, or stop it with SCRIPT KILL or FUNCTION KILL",
    "MISCONF": "Redis at {at} refuses writes because it cannot persist to disk (MISCONF); see "
    "the Redis log",
    "NOREPLICAS": "Redis at {at} refuses writes: too few replicas are connected (NOREPLICAS, "
    "min-replicas-to-write)",
}


def _explain(code: str, text: str, command: str, in_script: str, at: str) -> str:
    if code == "NOPERM" or (in_script and "The user executing the script" in text):
        if "of the channels" in text or "the channel mentioned" in text:
            return (
                f"Redis at {at} refused this ACL user a Pub/Sub channel (NOPERM{in_script}): "
                "lockguard publishes to LOCKGUARD_RELEASE_CHANNEL (grant &<channel>, or set "
                "LOCKGUARD_PUBLISH_RELEASE_EVENT=false)"
            )
        if "of the keys" in text:
            via = f" ('{command}')" if command else ""
            return (
                f"Redis at {at} refused this ACL user access to a key{via} "
                f"(NOPERM{in_script}): lockguard needs to read the keys its patterns match and "
                "to read and write its own {lockguard}:* keys (ACL key patterns)"
            )
        if in_script and not command:
            return (
                f"Redis at {at} refused this ACL user a command that lockguard's Lua script "
                f"calls (NOPERM{in_script}): the ACL user needs the commands its scripts "
                "call, not only EVALSHA"
            )
        if command:
            return (
                f"Redis at {at} refused the '{command}' command for this ACL user "
                f"(NOPERM{in_script}): {_need(command)}"
            )
        return f"Redis at {at} refused a request for this ACL user (NOPERM{in_script})"
    if code in _PLAIN:
        return _PLAIN[code].format(at=at, s=in_script)
    if code in _CLUSTER and not endpoint_is_cluster(at):
        return (
            f"Redis at {at} is a Redis Cluster node ({code}): set REDIS_CLUSTER=true (with "
            "REDIS_URL naming any node) so that lockguard follows the cluster's slots"
        )
    if code in ("MOVED", "ASK", "TRYAGAIN"):
        return (
            f"the Redis Cluster at {at}: the cluster's slots moved (resharding or "
            f"failover) during the request ({code}); run it again"
        )
    if code == "CLUSTERDOWN":
        return (
            f"the Redis Cluster at {at} is down or has slots that no node serves "
            "(CLUSTERDOWN); wait until CLUSTER INFO says cluster_state:ok"
        )
    if code == "CROSSSLOT":
        return (
            f"the Redis Cluster at {at} refused a request whose keys are in different hash "
            f"slots (CROSSSLOT{in_script}): a lockguard bug; please report it"
        )
    if "nknown command" in text or "nknown subcommand" in text or "nknown Redis command" in text:
        what = f"the '{command}' command" if command else "a command that lockguard sends"
        return (
            f"Redis at {at} does not know {what} (ERR{in_script}): renamed or disabled on "
            "this server, or the server is older than lockguard needs (Redis 6.2+)"
        )
    if in_script:
        return (
            f"Redis at {at} failed one of lockguard's Lua scripts (ERR{in_script}): "
            "a lockguard bug or an unsupported server; please report it"
        )
    what = f"the '{command}' command" if command else "a request"
    return f"Redis at {at} refused {what} ({code}{in_script})"


def _need(command: str) -> str:
    if command == "scan":
        return "lockguard needs SCAN to find the locks (+scan)"
    if command in _SCRIPTING:
        return "lockguard needs scripting for its atomic steps (+evalsha +script|load)"
    if command in _WRITES:
        return (
            "lockguard needs to write its own {lockguard}:* keys (+@write +@transaction on "
            "~{lockguard}:*)"
        )
    return f"the ACL user needs +{command}"


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    # redis-py's messages carry host:port only; cut anything that looks like a URL with userinfo.
    return text.split("\n", 1)[0][:400]
