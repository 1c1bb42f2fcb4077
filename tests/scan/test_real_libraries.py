"""Locks made by the real libraries in child processes that are then killed with SIGKILL: that
is how abandoned locks look in production. Real redis-server only."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

from bot.core.model import Finding, Layout, Reason
from bot.core.rules import Policy
from bot.scan.loop import run_scan
from bot.scan.result import ScanOptions

pytestmark = pytest.mark.real

THRESHOLD_MS = 1500
PAST = 1.6  # seconds between scans: each later scan is past the threshold

# Acquire a lock with a real library, say "ready", then hold it until killed.
CHILD = r"""
import sys, time
import redis

port, library, name, expire, renew, own_id = sys.argv[1:7]
conn = redis.Redis(host="127.0.0.1", port=int(port))
if library == "redis-py":
    lock = conn.lock(name, timeout=None if expire == "none" else float(expire))
elif library == "python-redis-lock":
    import redis_lock
    lock = redis_lock.Lock(conn, name, expire=None if expire == "none" else int(expire),
                           auto_renewal=renew == "renew", id=own_id or None)
else:
    raise SystemExit("unknown library " + library)
if not lock.acquire(blocking=False):
    raise SystemExit("lock already held")
print("ready", flush=True)
for line in sys.stdin:  # "release": the holder's own release, as its code would
    if line.strip() == "release":
        lock.release()
        print("released", flush=True)
while True:
    time.sleep(60)
"""


@contextmanager
def holder(
    port: int,
    library: str,
    name: str,
    expire: float | None = None,
    renew: bool = False,
    own_id: str = "",
) -> Iterator[subprocess.Popen[str]]:
    """A child process holding a lock (python-redis-lock with `id=own_id` when given); it
    releases the lock when "release" is written to its stdin, and is killed with SIGKILL on exit
    if still alive."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            str(port),
            library,
            name,
            "none" if expire is None else str(expire),
            "renew" if renew else "no",
            own_id,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if line.strip() != "ready":
            proc.kill()
            _, err = proc.communicate(timeout=10)
            pytest.fail(f"{library} child did not acquire {name!r}: {err[-2000:]}")
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL


def scan(client: redis.Redis) -> dict[bytes, Finding]:
    result = run_scan(
        client, ScanOptions([b"lock:*"], Policy(stale_threshold_ms=THRESHOLD_MS)), keep=1000
    )
    return {f.key: f for f in result.worst}


def token_has_time(token: bytes) -> bool:
    """redis-py before 8.2 mints uuid1().hex tokens, which carry the time they were taken;
    8.2 on mints uuid4().hex, which carries none: its age is known only across scans."""
    return token[12:13] == b"1"


def test_redis_py_lock_without_timeout_killed_is_infinite_ttl(real_redis: redis.Redis) -> None:
    with holder(
        real_redis.connection_pool.connection_kwargs["port"], "redis-py", "lock:report"
    ) as proc:
        kill(proc)
    time.sleep(1.6)
    f = scan(real_redis)[b"lock:report"]
    assert f.reason is Reason.INFINITE_TTL
    assert f.layout is Layout.REDIS_PY
    assert f.ttl_ms == -1
    assert f.identity == real_redis.get(b"lock:report")
    assert f.observations == 1
    if token_has_time(f.identity):
        # The uuid1 token says when it was taken: its age is known on first sight.
        assert f.owner.startswith("node ")
        assert 1.5 <= f.held_seconds < 30
        assert f.releasable  # held past the threshold, by its own token's time
        return
    # A uuid4 token says nothing of its age: a lock seen once is never offered.
    assert f.owner == ""
    assert f.held_seconds < 1.5
    assert not f.releasable
    time.sleep(PAST)
    again = scan(real_redis)[b"lock:report"]
    assert (again.reason, again.identity, again.observations) == (
        Reason.INFINITE_TTL,
        f.identity,
        2,
    )
    assert again.held_seconds >= 1.5
    assert again.releasable


def test_redis_py_lock_with_long_timeout_killed_goes_stale(real_redis: redis.Redis) -> None:
    port = real_redis.connection_pool.connection_kwargs["port"]
    with holder(port, "redis-py", "lock:nightly", expire=300) as proc:
        kill(proc)
    first = scan(real_redis)[b"lock:nightly"]
    assert first.layout is Layout.REDIS_PY
    assert first.reason is Reason.HEALTHY
    time.sleep(PAST)
    second = scan(real_redis)[b"lock:nightly"]
    assert second.reason is Reason.STALE_LEASE
    assert second.ttl_ms > 290_000  # long before redis would free it
    assert second.identity == first.identity
    assert second.rearms == 0


def test_python_redis_lock_without_expire_killed_is_infinite_ttl(real_redis: redis.Redis) -> None:
    port = real_redis.connection_pool.connection_kwargs["port"]
    with holder(port, "python-redis-lock", "billing") as proc:
        kill(proc)
    f = scan(real_redis)[b"lock:billing"]
    assert f.reason is Reason.INFINITE_TTL
    assert f.layout is Layout.PYTHON_REDIS_LOCK
    assert f.identity == real_redis.get(b"lock:billing")
    assert len(f.identity) == 24


def test_python_redis_lock_live_renewer_vs_killed_one(real_redis: redis.Redis) -> None:
    """A live process with auto_renewal keeps renewing: long_held_renewing, never stale. A killed
    one with a long expire looks the same until its renewal (at 2/3 of its 60 s) is overdue: it
    is reported, never offered, and says when it will be."""
    port = real_redis.connection_pool.connection_kwargs["port"]
    with (
        holder(port, "python-redis-lock", "alive", expire=2, renew=True) as alive,
        holder(port, "python-redis-lock", "dead", expire=60, renew=True) as dead,
    ):
        kill(dead)
        history: list[dict[bytes, Finding]] = []
        for i in range(3):
            if i:
                time.sleep(PAST)
            history.append(scan(real_redis))
        assert alive.poll() is None  # still running: its renewal thread did the work
    live = [h[b"lock:alive"] for h in history]
    gone = [h[b"lock:dead"] for h in history]
    assert all(f.layout is Layout.PYTHON_REDIS_LOCK for f in live + gone)
    assert [f.reason for f in live] == [
        Reason.HEALTHY,
        Reason.LONG_HELD_RENEWING,
        Reason.LONG_HELD_RENEWING,
    ]
    assert live[-1].rearms >= 1
    assert live[-1].held_seconds >= 2 * PAST - 0.1
    assert not live[-1].releasable
    assert [f.reason for f in gone] == [
        Reason.HEALTHY,
        Reason.LONG_HELD_RENEWING,
        Reason.LONG_HELD_RENEWING,
    ]
    assert gone[-1].ttl_ms > 50_000
    assert not gone[-1].releasable
    assert gone[-1].renewal.startswith("renewal not due yet (python-redis-lock renews at 2/3")
