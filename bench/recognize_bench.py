"""Per-lock cost of layout recognition (`bot.core.layouts.recognize`), the scan's hottest pure step.

    .venv/bin/python bench/recognize_bench.py [--bot-path DIR] [--locks 20000]

The layout mix is scan_bench.py's: 40% redis-py (uuid1), 30% python-redis-lock, 10% plain tokens
without a TTL, 19% Redisson hashes, 1% counters. Prints the best of 7 passes in µs per lock, in
total and per layout. `--bot-path` times another checkout's `bot` for before/after numbers.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
import time
import uuid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bot-path", help="import `bot` from this directory")
    parser.add_argument("--locks", type=int, default=20_000)
    args = parser.parse_args()
    sys.path.insert(0, args.bot_path or os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bot.core.layouts import recognize
    from bot.core.model import Snapshot

    now = int(time.time() * 1000)
    groups: dict[str, list[Snapshot]] = {}
    for i in range(args.locks):
        k = i % 100
        if k < 40:
            v, name = uuid.uuid1().hex.encode(), "redis-py"
        elif k < 70:
            v, name = base64.b64encode(os.urandom(18)), "python-redis-lock"
        elif k < 80:
            v, name = b"tok-%d" % i, "plain token, no TTL"
        elif k < 99:
            fields = ((str(uuid.uuid4()).encode() + b":1", b"1"),)
            groups.setdefault("redisson hash", []).append(
                Snapshot(b"lock:h%d" % i, "hash", 3_600_000, 0, now, fields=fields, hash_len=1)
            )
            continue
        else:
            v, name = b"3", "counter"
        pttl = -1 if name.startswith("plain") else 3_600_000
        groups.setdefault(name, []).append(
            Snapshot(b"lock:%d" % i, "string", pttl, 0, now, v, len(v))
        )

    def best(snaps: list[Snapshot]) -> float:
        times = []
        for _ in range(7):
            t = time.perf_counter()
            for s in snaps:
                recognize(s)
            times.append(time.perf_counter() - t)
        return min(times) / len(snaps) * 1e6

    every = [s for g in groups.values() for s in g]
    print(f"all layouts: {best(every):.3f} µs/lock ({len(every)} locks)")
    for name, snaps in groups.items():
        print(f"  {name:<22} {best(snaps):.3f} µs/lock")


if __name__ == "__main__":
    main()
