"""What the machine itself does to Redis's commands, apart from what lockguard sends: the floor
`bench/probe_bench.py` judges "no command over 2 ms" against.

- `pin`: a process's threads onto given CPUs (`--pin`: Redis on a core of its own).
- `steal_ms`: CPU time the hypervisor took from this VM (/proc/stat).
- `Burner`: a process spinning on the other CPU, as lockguard's client keeps it busy.
- `spin_control`: a script that only calls `TIME` in a loop for `SPIN_US` (lockguard's batch
  target), sent at a given share of Redis's time for a given wall time. It reads no key and
  allocates nothing, so every one of its runs over 1 ms or 2 ms (SLOWLOG, `EVALSHA`) is a
  stall of the server's thread that no command could have avoided: a vCPU descheduled, an
  interrupt, a page fault. Each script returns its longest gap between two `TIME` calls
  (`frozen`): the stall itself, seen from inside Redis.

Not part of the tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

#: How long each control script spins (µs): `bot.scan.batch_size.TARGET_US`.
SPIN_US = 500
#: Returns the longest gap (µs) between two consecutive `TIME` calls: a few µs unless the
#: server's thread was frozen in between.
SPIN_LUA = """
local t0 = redis.call('TIME')
local start = tonumber(t0[1]) * 1000000 + tonumber(t0[2])
local prev, gap, now = start, 0, start
repeat
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if now - prev > gap then gap = now - prev end
  prev = now
until now - start >= tonumber(ARGV[1])
return gap
"""
_gaps: list[int] = []


def frozen() -> list[int]:
    """The longest inner gap (µs) of every control script since the last call, longest first."""
    gaps = sorted(_gaps, reverse=True)
    _gaps.clear()
    return gaps


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of process `pid` (redis-server's main thread and its background ones) on
    `cpus` only (Linux; elsewhere nothing)."""
    if not hasattr(os, "sched_setaffinity"):
        return
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    for tid in tids:
        os.sched_setaffinity(tid, cpus)


def steal_ms() -> float:
    """CPU time stolen from this machine by its hypervisor so far, all CPUs (ms; 0 off Linux)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return 0.0
    ticks = int(fields[8]) if len(fields) > 8 else 0
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")


class Burner:
    """A child process spinning on one CPU at `nice` (the control phases: the other CPU kept as
    busy as lockguard's client keeps it)."""

    def __init__(self, nice: int) -> None:
        code = "while True: pass"
        self.proc = subprocess.Popen(["nice", "-n", str(nice), sys.executable, "-c", code])

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def spin_control(port: int, share: float, wall_s: float, nice: int) -> float:
    """`SPIN_LUA` scripts at `share` of Redis's time for `wall_s` seconds, the other CPU busy
    (a `Burner` at `nice`); the wall time taken."""
    return spin_controls([port], share, wall_s, nice)


def spin_controls(ports: list[int], share: float, wall_s: float, nice: int) -> float:
    """`spin_control` on every server of `ports` at once (a Cluster's primaries: one thread
    each, one `Burner`); the wall time until all end."""
    burner = Burner(nice)
    started = time.perf_counter()
    try:
        threads = [
            threading.Thread(target=_spin, args=(port, share, wall_s), daemon=True)
            for port in ports
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        burner.stop()
    return time.perf_counter() - started


def _spin(port: int, share: float, wall_s: float) -> None:
    import redis

    client = redis.Redis(host="127.0.0.1", port=port)
    spin = client.register_script(SPIN_LUA)
    every_s = SPIN_US / 1e6 / min(max(share, 0.05), 1.0)  # one script sent this often
    started = next_at = time.perf_counter()
    try:
        while next_at - started < wall_s:
            _gaps.append(int(spin(args=[SPIN_US])))
            next_at += every_s
            pause = next_at - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
    finally:
        client.close()
