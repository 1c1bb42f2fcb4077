"""Building the Redis client from settings, and turning Redis failures into one-line errors.

The client is byte-safe (`decode_responses=False`): keys and values stay exactly as stored. Error
messages name the endpoint (host, port, db) and never the password, which only ever travels inside
the client. Nor do they quote Redis's reply: a refusal can quote a command's arguments (lock
values, for one), so only its code word (`NOPERM`, `OOM`, ...) and the command's name are kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.exceptions import MasterDownError
from redis.retry import Retry

from bot.errors import ConfigError, LockguardError, RedisRefusedError, RedisUnavailableError
from bot.settings import Settings


def make_client(settings: Settings) -> redis.Redis:
    password = settings.redis_password.get_secret_value() if settings.redis_password else None
    common: dict[str, Any] = {
        "socket_timeout": settings.redis_timeout_seconds,
        "socket_connect_timeout": settings.redis_timeout_seconds,
        "decode_responses": False,
        # One immediate retry, on a connection error only (a pooled connection the server
        # dropped), not redis-py's default of several with backoff: a down Redis or a wrong
        # password fails at once. A timeout is never retried, so the wait is the configured
        # LOCKGUARD_REDIS_TIMEOUT_SECONDS, not twice it.
        "retry": Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
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
    """Turn every Redis failure (down, timed out, refused) into a LockguardError: exit 3, or
    exit 2 for a REDIS_URL that names a database the server does not have."""
    try:
        yield
    except redis.RedisError as exc:
        raise describe(exc, endpoint, secrets) from None


def describe(exc: redis.RedisError, endpoint: str,
             secrets: tuple[str, ...] = ()) -> LockguardError:
    """The one-line error for a Redis failure. Never quotes Redis's reply beyond a code word and a
    command name (a reply can quote arguments), and never a secret."""
    if isinstance(exc, redis.AuthenticationError):
        return RedisUnavailableError(
            f"Redis at {endpoint} refused the credentials (check REDIS_PASSWORD, or the "
            "user:password in REDIS_URL)")
    if isinstance(exc, redis.BusyLoadingError):  # a ConnectionError subclass in redis-py
        return RedisRefusedError(f"Redis at {endpoint} is loading its dataset into memory "
                                 "(LOADING); try again when it has finished")
    if isinstance(exc, redis.TimeoutError):
        return RedisUnavailableError(f"Redis at {endpoint} timed out")
    if isinstance(exc, redis.ConnectionError):
        return RedisUnavailableError(
            f"cannot reach Redis at {endpoint}: {_scrub(str(exc), secrets)}")
    if isinstance(exc, redis.ResponseError):
        return _refusal(exc, endpoint, secrets)
    return RedisUnavailableError(
        f"Redis at {endpoint}: the request failed ({type(exc).__name__})")


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
_KEPT_CODES = ("BUSY", "MISCONF", "NOREPLICAS", "WRONGTYPE", "LOADING", "MASTERDOWN", "READONLY",
               "OOM", "NOPERM", "EXECABORT", "UNKILLABLE", "NOTBUSY")
_CLUSTER = ("CLUSTERDOWN", "MOVED", "ASK", "TRYAGAIN", "CROSSSLOT")
# What redis-py's pipeline puts before a command's error: the command with its arguments.
_PIPELINE = re.compile(r"Command # \d+ \((?P<cmd>[^\s)]{1,64})[^\n]*? of pipeline caused error: ")
_NAMED = re.compile(r"(?:to run the|unknown command|unknown subcommand) [`']"
                    r"(?P<cmd>[\w|.:-]{1,40})[`']", re.IGNORECASE)
_SCRIPT = re.compile(r"\bscript: [0-9a-f]{40}\b|Error running script|"
                     r"^The user executing the script|called from script")
_SHA = re.compile(r"\bscript: (?P<sha>[0-9a-f]{12})[0-9a-f]{28}\b")
_WRITES = frozenset((
    "set", "setex", "psetex", "setnx", "getset", "getdel", "getex", "append", "incr", "incrby",
    "decr", "decrby", "hset", "hsetnx", "hmset", "hdel", "hincrby", "del", "unlink", "expire",
    "pexpire", "expireat", "pexpireat", "persist", "rename", "xadd", "xtrim", "xdel", "zadd",
    "zrem", "zremrangebyscore", "lpush", "rpush", "lpop", "rpop", "ltrim", "sadd", "srem",
    "multi", "exec", "watch"))
_SCRIPTING = frozenset(("eval", "evalsha", "eval_ro", "evalsha_ro", "script", "script|load",
                        "fcall", "fcall_ro"))


def _refusal(exc: redis.ResponseError, endpoint: str,
             secrets: tuple[str, ...]) -> LockguardError:
    text = str(exc.args[0]) if exc.args else ""
    command = ""
    if m := _PIPELINE.match(text):
        command, text = m["cmd"].lower(), text[m.end():]
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
            "`databases` setting); choose a database index it has")
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
            return (f"Redis at {at} refused this ACL user a Pub/Sub channel (NOPERM{in_script}): "
                    "lockguard publishes to LOCKGUARD_RELEASE_CHANNEL (grant &<channel>, or set "
                    "LOCKGUARD_PUBLISH_RELEASE_EVENT=false)")
        if "of the keys" in text:
            via = f" ('{command}')" if command else ""
            return (f"Redis at {at} refused this ACL user access to a key{via} "
                    f"(NOPERM{in_script}): lockguard needs to read the keys its patterns match and "
                    "to read and write its own {lockguard}:* keys (ACL key patterns)")
        if in_script and not command:
            return (f"Redis at {at} refused this ACL user a command that lockguard's Lua script "
                    f"calls (NOPERM{in_script}): the ACL user needs the commands its scripts "
                    "call, not only EVALSHA")
        if command:
            return (f"Redis at {at} refused the '{command}' command for this ACL user "
                    f"(NOPERM{in_script}): {_need(command)}")
        return f"Redis at {at} refused a request for this ACL user (NOPERM{in_script})"
    if code in _PLAIN:
        return _PLAIN[code].format(at=at, s=in_script)
    if code in _CLUSTER:
        return (f"Redis at {at} is a Redis Cluster node ({code}); lockguard needs a standalone "
                "Redis or a primary of one")
    if "nknown command" in text or "nknown subcommand" in text or "nknown Redis command" in text:
        what = f"the '{command}' command" if command else "a command that lockguard sends"
        return (f"Redis at {at} does not know {what} (ERR{in_script}): renamed or disabled on "
                "this server, or the server is older than lockguard needs (Redis 6.2+)")
    if in_script:
        return (f"Redis at {at} failed one of lockguard's Lua scripts (ERR{in_script}): "
                "a lockguard bug or an unsupported server; please report it")
    what = f"the '{command}' command" if command else "a request"
    return f"Redis at {at} refused {what} ({code}{in_script})"


def _need(command: str) -> str:
    if command == "scan":
        return "lockguard needs SCAN to find the locks (+scan)"
    if command in _SCRIPTING:
        return "lockguard needs scripting for its atomic steps (+evalsha +script|load)"
    if command in _WRITES:
        return ("lockguard needs to write its own {lockguard}:* keys (+@write +@transaction on "
                "~{lockguard}:*)")
    return f"the ACL user needs +{command}"


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    # redis-py's messages carry host:port only; cut anything that looks like a URL with userinfo.
    return text.split("\n", 1)[0][:400]
