"""Narrowed-scan benchmark: what keeping everyone else's tenure history costs.

    .venv/bin/python bench/narrow_bench.py [--locks 100000]

Starts a redis-server (free loopback port, no persistence), plants `--locks` locks under
`lock:x:*` and as many under `lock:y:*`, runs one full scan of `lock:*`, then a narrowed scan of
`lock:y:*` (which merges its tenure records into the history in force, `bot.store.scans`), and
prints both times and, from `INFO commandstats` over the narrowed scan, the calls and the mean
server time of the merge's commands (HSCAN, HSET) next to the batch script's (EVALSHA). Not part
of the tests.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.cases.reclaim_config import ReclaimConfig  # noqa: E402
from bot.core.rules import Policy  # noqa: E402
from bot.demo.embedded import RedisProcess  # noqa: E402
from bot.engine import Engine  # noqa: E402
from bot.scan.result import ScanOptions  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--locks", type=int, default=100_000, help="locks under each of x and y")
    args = ap.parse_args()
    server = RedisProcess()
    r = server.client()
    try:
        with r.pipeline(transaction=False) as pipe:
            for i in range(args.locks):
                pipe.set(b"lock:x:%d" % i, b"tok-%d" % i)
                pipe.set(b"lock:y:%d" % i, b"tok-%d" % i)
                if i % 5000 == 4999:
                    pipe.execute()
            pipe.execute()
        policy = Policy(stale_threshold_ms=900_000)
        engine = Engine(r, ScanOptions([b"lock:*"], policy), ReclaimConfig(policy=policy))
        t0 = time.perf_counter()
        engine.scan(propose=False)
        full = time.perf_counter() - t0
        r.config_resetstat()
        t0 = time.perf_counter()
        engine.scan(pattern="lock:y:*", propose=False)
        narrow = time.perf_counter() - t0
        stats = r.info("commandstats")
    finally:
        r.close()
        server.stop()
    print(f"redis-server {server.version}; command: bench/narrow_bench.py --locks {args.locks}")
    print(f"full scan of {2 * args.locks:,} locks: {full:.2f} s")
    print(f"narrowed scan of {args.locks:,} (lock:y:*), merge included: {narrow:.2f} s")
    print("| command | calls | mean server time (µs) |")
    print("|---|---:|---:|")
    for name in ("hscan", "hset", "evalsha"):
        s = stats.get(f"cmdstat_{name}", {})
        print(f"| {name.upper()} | {s.get('calls', 0):,} | {s.get('usec_per_call', 0):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
