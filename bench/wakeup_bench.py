"""Kill -> offered, and approve -> a waiter holds the lock, for each lock library, with real
workers on a real redis-server.

For each library: a holder takes the lock with the library itself and works for `--job` s while
lockguard scans every `--every` s (the scan every entry point runs: scan, then a case for what
is releasable, `bot.cases.opening.scan_and_propose`); the holder is then SIGKILLed mid-job while
`--waiters` other workers wait in the library's own blocking acquire. When a scan offers the
lock (puts it in a case) it is approved at once (`bot.cases.approval.approve`, dry run off),
and the time until the first waiter says it holds the lock is measured. A lock that expires on
its own before any scan can prove it abandoned is said so, with when a waiter got it.

    .venv/bin/python bench/wakeup_bench.py [--threshold 30] [--expire 60] [--only NAME ...]

Libraries: the Python ones run in this venv (pottery and sherlock are installed with pip into it
when missing: they are bench-only); BullMQ through tests/node (npm ci, as its tests do);
node-redlock 4.2.0 is installed with npm into ~/.cache/lockguard-bench once. Redisson (Java) is
not run: its jars come from Maven Central, which this machine does not reach.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from bot.cases.approval import approve, scan_and_propose  # noqa: E402
from bot.cases.reclaim_config import ReclaimConfig  # noqa: E402
from bot.core.rules import Policy  # noqa: E402
from bot.demo.embedded import RedisProcess  # noqa: E402
from bot.scan.result import ScanOptions  # noqa: E402

PATTERNS = [b"lock:*", b"redlock:*", b"jobs:*", b"bull:*:lock"]
#: How long a waiter may take after the approval (BullMQ's stalled checker runs every 30 s, and
#: re-queues a job the second time it finds its lock gone).
WAKE_TIMEOUT_S = 120

# A holder or a waiter of one Python library: prints "acquired" once it holds the lock, then
# works (a holder is SIGKILLed mid-job; a waiter is stopped at the end).
PY_WORKER = r"""
import os, sys, time
import redis
lib, port, name, expire = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
r = redis.Redis(host="127.0.0.1", port=port)
if lib == "redis-py":
    lock = r.lock("lock:" + name, timeout=expire, sleep=0.1)
elif lib.startswith("python-redis-lock"):
    import redis_lock
    own = f"host-{os.getpid()}" if lib.endswith("-id") else None
    lock = redis_lock.Lock(r, name, expire=expire, auto_renewal=True, id=own)
elif lib == "pottery":
    from pottery import Redlock
    lock = Redlock(key=name, masters={r}, auto_release_time=expire)
elif lib == "sherlock":
    import sherlock
    lock = sherlock.RedisLock("jobs:" + name, client=r, expire=expire, timeout=3600)
print("waiting", flush=True)
while not lock.acquire():
    pass
print("acquired", flush=True)
while True:
    time.sleep(60)
"""

# node-redlock 4.2.0: `lock()` retries retryCount times (-1: forever) every retryDelay ms.
REDLOCK_WORKER = r"""
const Redis = require("ioredis");
const Redlock = require("redlock");
const [port, name, expire] = process.argv.slice(2);
const settings = { retryCount: -1, retryDelay: 200, retryJitter: 100 };
const redlock = new Redlock([new Redis(Number(port))], settings);
console.log("waiting");
redlock.lock(name, Number(expire) * 1000).then(() => console.log("acquired"));
setInterval(() => {}, 60000);
"""


@dataclass
class Outcome:
    library: str
    offered_s: float | None = None  # after the kill
    expired_s: float | None = None  # after the kill, when no scan offered it first
    held_s: float | None = None  # after the approval (or the kill, when it expired)
    verdicts: str = ""


class Procs:
    def __init__(self) -> None:
        self.all: list[subprocess.Popen[str]] = []

    def start(self, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
        )
        self.all.append(proc)
        return proc

    def close(self) -> None:
        for p in self.all:
            if p.poll() is None:
                p.kill()
            p.wait(10)
        self.all.clear()


def line_of(proc: subprocess.Popen[str], want: str, timeout: float) -> bool:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], deadline - time.monotonic())
        if not ready:
            return False
        text = proc.stdout.readline()
        if not text:
            return False
        if want in text:
            return True
    return False


def first_acquired(waiters: list[subprocess.Popen[str]], timeout: float) -> float | None:
    """Seconds until a waiter says "acquired" (None: none within `timeout`; 0: look once)."""
    start = time.monotonic()
    pipes = [w.stdout for w in waiters if w.stdout is not None]
    while True:
        left = timeout - (time.monotonic() - start)
        ready, _, _ = select.select(pipes, [], [], max(left, 0))
        for pipe in ready:
            said = pipe.readline()
            if "acquired" in said or '"active"' in said:
                return time.monotonic() - start
        if not ready and left <= 0:
            return None


def watch(
    r: redis.Redis,
    key: bytes,
    threshold_s: int,
    every: float,
    kill_at: float,
    killer: Callable[[], None],
    waiters: list[subprocess.Popen[str]],
    lib: str,
) -> Outcome:
    policy = Policy(stale_threshold_ms=threshold_s * 1000)
    opts = ScanOptions(PATTERNS, policy)
    cfg = ReclaimConfig(
        dry_run=False, release_channel="locks:reclaimed", policy=policy, patterns=tuple(PATTERNS)
    )
    out = Outcome(lib)
    started, killed = time.monotonic(), None
    seen: list[str] = []
    while True:
        now = time.monotonic()
        if killed is None and now - started >= kill_at:
            killer()
            killed = time.monotonic()
        result, case = scan_and_propose(r, opts, cfg, keep=1000)
        found = {f.key: f for f in result.worst}.get(key)
        if found is not None and (not seen or seen[-1] != found.reason.value):
            seen.append(found.reason.value)
        if killed is not None and case is not None and key in {lk.key for lk in case.locks}:
            out.offered_s = time.monotonic() - killed
            clicked = time.monotonic()
            approve(r, case.id, "bench", cfg)
            took = first_acquired(waiters, WAKE_TIMEOUT_S)
            out.held_s = None if took is None else time.monotonic() - clicked
            break
        if killed is not None and first_acquired(waiters, 0) is not None:
            # no scan could prove it abandoned: it expired and a waiter took it
            out.expired_s = out.held_s = time.monotonic() - killed
            break
        time.sleep(max(0.0, every - (time.monotonic() - now)))
    out.verdicts = " > ".join(seen)
    return out


def python_library(lib: str, server: RedisProcess, args: argparse.Namespace) -> Outcome:
    key = {
        "redis-py": b"lock:job",
        "pottery": b"redlock:job",
        "sherlock": b"jobs:job",
    }.get(lib, b"lock:job")
    procs = Procs()
    try:
        argv = [sys.executable, "-c", PY_WORKER, lib, str(server.port), "job", str(args.expire)]
        holder = procs.start(argv)
        if not line_of(holder, "acquired", 10):
            raise SystemExit(f"{lib}: the holder did not acquire the lock")
        waiters = [procs.start(argv) for _ in range(args.waiters)]
        for w in waiters:
            line_of(w, "waiting", 10)
        return watch(
            server.client(),
            key,
            args.threshold,
            args.every,
            args.job,
            lambda: os.kill(holder.pid, signal.SIGKILL),
            waiters,
            lib,
        )
    finally:
        procs.close()


def node_redlock(server: RedisProcess, args: argparse.Namespace) -> Outcome:
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        raise SystemExit("node-redlock: node and npm are needed")
    home = Path.home() / ".cache" / "lockguard-bench" / "redlock"
    if not (home / "node_modules" / "redlock").exists():
        home.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--silent", "--prefix", str(home), "redlock@4.2.0", "ioredis@4"],
            check=True,
        )
    script = home / "worker.js"
    script.write_text(REDLOCK_WORKER)
    env = {**os.environ, "NODE_PATH": str(home / "node_modules")}
    procs = Procs()
    try:
        argv = [node, str(script), str(server.port), "lock:job", str(args.expire)]
        holder = procs.start(argv, env)
        if not line_of(holder, "acquired", 20):
            raise SystemExit("node-redlock: the holder did not acquire the lock")
        waiters = [procs.start(argv, env) for _ in range(args.waiters)]
        for w in waiters:
            line_of(w, "waiting", 20)
        kill = lambda: os.kill(holder.pid, signal.SIGKILL)  # noqa: E731
        return watch(
            server.client(), b"lock:job", args.threshold, args.every, args.job, kill, waiters,
            "node-redlock",
        )  # fmt: skip
    finally:
        procs.close()


def bullmq(server: RedisProcess, args: argparse.Namespace) -> Outcome:
    """The job a SIGKILLed worker held; its waiters: idle workers of the same queue, which take
    it once BullMQ's stalled checker (in every worker, every stalledInterval) re-queues it."""
    from tests.node.bullmq import BullMQ, ensure_installed, jobs

    bq = BullMQ(ensure_installed(), "bullmq", server.port)
    procs = Procs()
    try:
        bq.add("mail", jobs(1))
        holder = bq.work("mail", lock_duration_ms=args.expire * 1000)
        key = f"bull:mail:{holder.job}:lock".encode()
        waiters = [procs.start(bq._argv("work", "mail", "bull")) for _ in range(args.waiters)]
        time.sleep(2)  # the idle workers connect and block on the queue's marker
        return watch(
            server.client(), key, args.threshold, args.every, args.job, holder.kill, waiters,
            "bullmq",
        )  # fmt: skip
    finally:
        procs.close()
        bq.close()


LIBRARIES = [
    "redis-py",
    "python-redis-lock",
    "python-redis-lock-id",
    "pottery",
    "sherlock",
    "node-redlock",
    "bullmq",
]


def ensure_python_libraries() -> None:
    missing = []
    for module, package in (("pottery", "pottery"), ("sherlock", "sherlock")):
        try:
            __import__(module)
        except ImportError:
            missing.append(package)
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threshold", type=int, default=30, help="stale threshold, s (30)")
    ap.add_argument("--expire", type=int, default=60, help="each lock's lease, s (60)")
    ap.add_argument("--job", type=float, default=10, help="the holder works this long, s (10)")
    ap.add_argument("--every", type=float, default=1.0, help="a scan every this many s (1)")
    ap.add_argument("--waiters", type=int, default=3, help="workers waiting for the lock (3)")
    ap.add_argument("--only", nargs="*", choices=LIBRARIES, default=LIBRARIES)
    args = ap.parse_args()
    ensure_python_libraries()
    rows = []
    for lib in args.only:
        with RedisProcess() as server:
            if lib == "node-redlock":
                out = node_redlock(server, args)
            elif lib == "bullmq":
                out = bullmq(server, args)
            else:
                out = python_library(lib, server, args)
        rows.append(out)
        print(json.dumps(out.__dict__), flush=True)
    print(
        f"\nthreshold {args.threshold}s, lease {args.expire}s, holder killed after "
        f"{args.job:g}s, a scan every {args.every:g}s, {args.waiters} waiters"
    )
    print(f"{'library':<22} {'kill->offered':>14} {'approve->held':>14}  verdicts seen")
    for o in rows:
        offered = f"{o.offered_s:.1f}s" if o.offered_s is not None else "-"
        held = f"{o.held_s:.2f}s" if o.held_s is not None else f"not in {WAKE_TIMEOUT_S}s"
        if o.expired_s is not None:
            offered, held = "never", f"expired: kill+{o.expired_s:.1f}s"
        print(f"{o.library:<22} {offered:>14} {held:>14}  {o.verdicts}")


if __name__ == "__main__":
    main()
