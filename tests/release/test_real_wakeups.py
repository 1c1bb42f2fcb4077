"""Waiters blocked in a real library's own `acquire()` resume once lockguard releases an
abandoned lock: python-redis-lock with its own `id=` (its waiters block in BLPOP on
`lock-signal:NAME` and only a push wakes them). Real redis-server only."""

from __future__ import annotations

import select
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest
import redis

from bot.cases.approval import approve
from bot.cases.opening import scan_and_propose
from bot.core.model import Layout
from tests.cases.test_reclaim import LIVE, OPTS, PAST
from tests.scan.test_real_libraries import holder, kill

pytestmark = pytest.mark.real

WAITER = r"""
import sys, time
import redis, redis_lock
port, name, own_id = sys.argv[1:4]
lock = redis_lock.Lock(redis.Redis(host="127.0.0.1", port=int(port)), name, id=own_id)
print("waiting", flush=True)
lock.acquire(blocking=True)  # no expire, no timeout: BLPOP on lock-signal:NAME, forever
print("acquired", flush=True)
time.sleep(60)
"""


@contextmanager
def waiter(port: int, name: str, own_id: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WAITER, str(port), name, own_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "waiting"
        yield proc
    finally:
        proc.kill()
        proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def blocked(client: redis.Redis) -> int:
    return sum(1 for c in client.client_list() if c.get("cmd") == "blpop")


def first_to_acquire(procs: list[subprocess.Popen[str]], timeout: float) -> int | None:
    """The index of the first waiter that says it acquired the lock within `timeout` s."""
    pipes = {p.stdout.fileno(): i for i, p in enumerate(procs) if p.stdout is not None}
    ready, _, _ = select.select(list(pipes), [], [], timeout)
    for fd in ready:
        i = pipes[fd]
        if procs[i].stdout.readline().strip() == "acquired":  # type: ignore[union-attr]
            return i
    return None


def test_waiters_of_a_python_redis_lock_with_its_own_id_resume_within_1s(
    real_redis: redis.Redis,
) -> None:
    port = real_redis.connection_pool.connection_kwargs["port"]
    with holder(port, "python-redis-lock", "job", own_id="host-1234") as proc:
        kill(proc)
    assert real_redis.get(b"lock:job") == b"host-1234"
    with ExitStack() as stack:
        waiters = [stack.enter_context(waiter(port, "job", f"worker-{n}")) for n in (1, 2)]
        deadline = time.monotonic() + 10
        while blocked(real_redis) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert blocked(real_redis) == 2  # both wait in the library's own BLPOP
        scan_and_propose(real_redis, OPTS, LIVE)
        time.sleep(PAST)
        result, case = scan_and_propose(real_redis, OPTS, LIVE)
        f = {f.key: f for f in result.worst}[b"lock:job"]
        assert (f.layout, f.identity, f.releasable) == (
            Layout.PYTHON_REDIS_LOCK,
            b"host-1234",
            True,
        )
        assert case is not None
        assert [lk.key for lk in case.locks] == [b"lock:job"]
        clicked = time.monotonic()
        assert approve(real_redis, case.id, "ann", LIVE).released == 1
        first = first_to_acquire(waiters, timeout=1.0)
        took = time.monotonic() - clicked
        assert first is not None, "no waiter woke within 1 s of the approval"
        assert took < 1.0
        assert real_redis.get(b"lock:job") == f"worker-{first + 1}".encode()
