"""Paired A/B of batch scripts (`SCAN_KEYS_LUA` and `READ_KEYS_LUA`, or an older copy's one
`READ_BATCH_LUA`, of two or more copies of `bot/scan/batch_script.py`) on one redis-server and
one dataset, in the second scan's state.

    .venv/bin/python bench/batch_script_ab.py N NAME=PATH [NAME=PATH ...]   (PASSES=8 to set)

Fills N locks and N other keys (`scan_bench.populate`), runs one `run_scan` (this checkout's) so
that every lock has a tenure record, then, pass after pass, reads the whole `lock:*` keyspace with
each script in turn: that table as the previous records, an empty one as this scan's. Prints
per pass and script: EVALSHA server µs per key (INFO commandstats), the script's own measure,
the inner commands' µs, redis.calls per key, and INFO errorstats; then each script's passes.
The server runs on CPU 0, this process on CPU 1. Not part of the tests.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis
import scan_bench

from bot.core.rules import Policy
from bot.scan import ReadMode
from bot.scan.loop import run_scan
from bot.scan.result import ScanOptions
from bot.store.keyspace import PREFIX

_OUTSIDE = ("cmdstat_evalsha", "cmdstat_config|resetstat")


def load_script(name: str, path: str) -> tuple[str, str | None]:
    """A copy's batch read: its SCAN and read scripts, or (before they were two) its one."""
    spec = importlib.util.spec_from_file_location("batch_script_" + name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if hasattr(module, "READ_KEYS_LUA"):
        return str(module.SCAN_KEYS_LUA), str(module.READ_KEYS_LUA)
    return str(module.READ_BATCH_LUA), None


def one_pass(c: redis.Redis, scripts: tuple[Any, Any], prev: bytes) -> tuple[int, int]:
    """Keys read and the scripts' own µs over the whole keyspace."""
    first, read = scripts
    cursor: Any = b"0"
    keys = own_us = 0
    tables = [prev, PREFIX + b"leases:ab-none"]
    args: list[Any] = [b"lock:*", 1000, 250, 16, 16, 512, b"", b"", b"", 4096, 64, 10]
    while True:
        reply = first(keys=[] if read else tables, args=[cursor, *args])
        if read is not None:  # the keys found, then their read
            found = reply
            reply = read(keys=tables, args=[*found[:6], 16, 512, *found[6]])
        keys += int(reply[10])
        own_us += int(reply[12])
        cursor = reply[0]
        if cursor in (b"0", 0):
            return keys, own_us


def main() -> None:
    n = int(sys.argv[1])
    variants = dict(arg.split("=", 1) for arg in sys.argv[2:])
    passes = int(os.environ.get("PASSES", "8"))
    server = scan_bench.Server()
    try:
        scan_bench.populate(server, n, n)
        c = redis.Redis(port=server.port)
        os.sched_setaffinity(server.proc.pid, {0})
        os.sched_setaffinity(0, {1})
        policy = Policy(stale_threshold_ms=900_000)
        run_scan(c, ScanOptions([b"lock:*"], policy, mode=ReadMode.LUA))
        tables = [k for k in c.scan_iter(match=PREFIX + b"leases:*") if c.type(k) == b"hash"]
        prev = max(tables, key=c.hlen)
        scripts = {
            k: tuple(c.register_script(x) if x else None for x in load_script(k, v))
            for k, v in variants.items()
        }
        per_key: dict[str, list[float]] = {k: [] for k in variants}
        for p in range(passes):
            for name, script in scripts.items():
                c.config_resetstat()
                keys, own_us = one_pass(c, script, prev)
                stats = c.info("commandstats")
                ev = stats["cmdstat_evalsha"]["usec"]
                inner = [v for k, v in stats.items() if k not in _OUTSIDE]
                per_key[name].append(ev / keys)
                print(
                    f"pass {p} {name}: keys {keys} evalsha {ev} us ({ev / keys:.3f} us/key) "
                    f"own {own_us} inner {sum(v['usec'] for v in inner)} "
                    f"calls/key {sum(v['calls'] for v in inner) / keys:.3f} "
                    f"errors {dict(c.info('errorstats'))}",
                    flush=True,
                )
        for name, values in per_key.items():
            print(f"{name}: us/key {[round(x, 3) for x in values]} min {min(values):.3f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
