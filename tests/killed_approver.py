"""An approver killed mid-release: `lockguard approve CASE --by NAME` in a child process, SIGKILLed
once it has recorded more than one batch of outcomes but not all. That is how a release is cut
short in production (an OOM kill, a node lost); the tests then show what finishes it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import redis

from bot.store.keyspace import outcomes_key

ROOT = Path(__file__).resolve().parent.parent
_APPROVER = """
import sys
from bot import cli
sys.exit(cli.main(["approve", sys.argv[1], "--by", sys.argv[2], "--yes-count", sys.argv[3]]))
"""


def kill_mid_release(
    r: redis.Redis,
    case_id: str,
    env: Mapping[str, str],
    *,
    by: str = "ann",
    lock_count: int,
    after: int = 600,
) -> int:
    """Start the approver with `env`, SIGKILL it once `after` outcomes are recorded; the number
    recorded when it died (asserted below `lock_count`: it was cut short)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _APPROVER, case_id, by, str(lock_count)],
        env={**env, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while r.hlen(outcomes_key(case_id)) < after:  # more than one batch done, not all
            assert time.monotonic() < deadline, "the approver recorded too little in 30 s"
            assert proc.poll() is None, "the approver exited before it could be killed"
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
    done = r.hlen(outcomes_key(case_id))
    assert done < lock_count, "the approver finished before it could be killed"
    return int(done)
