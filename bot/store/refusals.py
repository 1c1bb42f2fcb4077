"""Redis's error replies turned into one line that says what to do (`refusal`).

Only the reply's code word and the command's name are kept: a reply can quote a command's
arguments (lock values, for one). An ACL refusal names what lockguard needs. A database the
server does not have is exit 2.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import redis
from redis.exceptions import MasterDownError

from bot.core.errors import ConfigError, LockguardError, RedisRefusedError


def endpoint_is_cluster(endpoint: str) -> bool:
    return endpoint.startswith("redis-cluster")


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


def refusal(exc: redis.ResponseError, endpoint: str, scrub: Callable[[str], str]) -> LockguardError:
    """The one line for a command Redis answered with an error (its code word and the command's
    name kept, nothing else of the reply), `scrub` taking any secret out."""
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
    message = scrub(_explain(code, text, command, in_script, endpoint))
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
        return _acl_refusal(text, command, in_script, at)
    if code in _PLAIN:
        return _PLAIN[code].format(at=at, s=in_script)
    if code in _CLUSTER:
        return _cluster_refusal(code, in_script, at)
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


def _acl_refusal(text: str, command: str, in_script: str, at: str) -> str:
    """NOPERM: what the ACL user was refused (a channel, a key, a command), and what it needs."""
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


def _cluster_refusal(code: str, in_script: str, at: str) -> str:
    if not endpoint_is_cluster(at):
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
    return (
        f"the Redis Cluster at {at} refused a request whose keys are in different hash "
        f"slots (CROSSSLOT{in_script}): a lockguard bug; please report it"
    )


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
