"""Cluster benchmark: a full scan on a 3-primary Redis Cluster next to one server, same keyspace.

    .venv/bin/python bench/cluster_bench.py [--locks 1000000] [--others 1000000] [--rounds 3]

Starts one redis-server and a 3-primary cluster (`tests.embedded_cluster`), all on loopback with
no persistence, and fills both with the same keys (`bench/scan_bench.py`'s mix of lock layouts under
`lock:*` and as many other keys), the cluster's through `redis-cli --pipe` to each key's primary.
Then, each in its own child process so that its peak RSS (VmHWM) is its own,
`bot.scan.loop.run_scan` twice on each (scan 1: every lease new; scan 2: continuing them)
`--rounds` times (0: neither, and no single server is started). Not part of the tests.

`--bounds` (off by default: a minute or more at 300k) then measures, on the cluster only, the
bounds of `bench/probe_bench.py` on every primary (`bench/cluster_bounds.py` says how), with PASS
or FAIL per bound; `--budget` is the scan budget they are measured at (the setting's default).

    .venv/bin/python bench/cluster_bench.py --locks 300000 --others 300000 --rounds 1 --bounds
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import cluster_bounds  # noqa: E402  (bench/ is not a package)
import probe_bench  # noqa: E402
import scan_bench  # noqa: E402

PATTERN = b"lock:*"


def commands(locks: int, others: int, seed: int = 7) -> list[tuple[bytes, bytes]]:
    """(key, RESP commands) in scan_bench's order and mix."""
    rnd = random.Random(seed)
    out = []
    for i in range(max(locks, others)):
        if i < locks:
            cmds = scan_bench._lock_commands(i, rnd)
            out.append((cmds[0].split(b"\r\n")[4], b"".join(cmds)))
        if i < others:
            cmds = scan_bench._other_commands(i, rnd)
            out.append((cmds[0].split(b"\r\n")[4], b"".join(cmds)))
    return out


def pipe_into(port: int, data: list[bytes]) -> None:
    proc = subprocess.Popen(
        ["redis-cli", "-p", str(port), "--pipe"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    out, _ = proc.communicate(b"".join(data))
    if b"errors: 0" not in out:
        sys.exit(f"population failed: {out.decode(errors='replace')}")


def child(kind: str, port: int) -> None:
    import redis
    from redis.cluster import RedisCluster

    from bot.core.rules import Policy
    from bot.scan.loop import run_scan
    from bot.scan.result import ScanOptions

    client: redis.Redis = (
        RedisCluster(host="127.0.0.1", port=port)  # type: ignore[assignment]
        if kind == "cluster"
        else redis.Redis(host="127.0.0.1", port=port)
    )
    options = ScanOptions(patterns=[PATTERN], policy=Policy(stale_threshold_ms=900_000))
    walls = []
    for _ in range(2):
        started = time.perf_counter()
        result = run_scan(client, options)
        walls.append(time.perf_counter() - started)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "walls": walls,
                "scanned": result.scanned,
                "mode": result.mode,
                "cpu": usage.ru_utime + usage.ru_stime,
                "duplicates": result.stats.duplicates,
                "vm_hwm_kib": scan_bench.vm_hwm_kib(),
            }
        )
    )


def redis_cpu(ports: list[int]) -> float:
    """CPU seconds (user + sys) the redis-servers on these ports have used so far."""
    import redis

    total = 0.0
    for port in ports:
        with redis.Redis(port=port) as c:
            info = c.info("cpu")
            total += float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    return total


def measure(kind: str, port: int, ports: list[int]) -> dict[str, object]:
    before = redis_cpu(ports)
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(port)],
        check=True,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env=dict(os.environ),
    ).stdout
    row = dict(json.loads(out))
    row["redis_cpu"] = redis_cpu(ports) - before
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--locks", type=int, default=1_000_000)
    ap.add_argument("--others", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=1, help="measure both sides this many times")
    ap.add_argument("--bounds", action="store_true", help="then the bounds on every primary")
    ap.add_argument("--budget", type=float, default=probe_bench._default_budget())
    ap.add_argument("--child", nargs="+")
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    from tests.embedded_cluster import EmbeddedCluster

    print(scan_bench.environment(), flush=True)
    started = time.monotonic()
    keyspace = commands(args.locks, args.others)
    single = scan_bench.Server() if args.rounds > 0 else None
    ok = True
    with EmbeddedCluster(3) as cluster:
        try:
            if single is not None:
                pipe_into(single.port, [c for _, c in keyspace])
            owners = slot_owners(cluster.primaries())
            by_node = populate(keyspace, owners)
            del keyspace
            print(
                f"populated {args.locks:,} locks + {args.others:,} other keys in "
                f"{time.monotonic() - started:.1f} s; per primary: "
                f"{', '.join(f'{p}: {len(v):,}' for p, v in by_node.items())} keys",
                flush=True,
            )
            nodes = [n.port for n in cluster.primaries()]
            rows: list[tuple[str, dict[str, object]]] = []
            for i in range(args.rounds):  # the two sides in turn: a noisy machine hits both
                assert single is not None
                rows.append(
                    (
                        f"single server (round {i + 1})",
                        measure("single", single.port, [single.port]),
                    )
                )
                rows.append(
                    (f"3-primary cluster (round {i + 1})", measure("cluster", cluster.port, nodes))
                )
            if rows:
                timing_table(rows, args.rounds)
            if args.bounds:
                from bot.store.slots import slot_of

                ok = cluster_bounds.bounds(nodes, owners[slot_of(b"probe:key")], cluster.port, args)
        finally:
            if single is not None:
                single.stop()
    print("command: " + " ".join(["bench/cluster_bench.py", *sys.argv[1:]]))
    return 0 if ok else 1


def slot_owners(primaries: list[Any]) -> dict[int, int]:
    """slot -> the port of the primary serving it."""
    owners: dict[int, int] = {}
    for n in primaries:
        with n.client() as c:
            my_id = c.execute_command("CLUSTER", "MYID")
            for start, end, primary, *_ in c.execute_command("CLUSTER", "SLOTS"):
                if primary[2] == my_id:
                    owners.update(dict.fromkeys(range(start, end + 1), n.port))
    return owners


def populate(keyspace: list[tuple[bytes, bytes]], owners: dict[int, int]) -> dict[int, list[bytes]]:
    from bot.store.slots import slot_of

    by_node: dict[int, list[bytes]] = {}
    for key, cmd in keyspace:
        by_node.setdefault(owners[slot_of(key)], []).append(cmd)
    for port, data in by_node.items():
        pipe_into(port, data)
    return by_node


def timing_table(rows: list[tuple[str, dict[str, object]]], rounds: int) -> None:
    print(
        "\n| keyspace on | scan 1 | scan 2 | locks | read mode | peak RSS | CPU: lockguard "
        "| CPU: Redis |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    for name, r in rows:
        w1, w2 = r["walls"]  # type: ignore[misc]
        print(
            f"| {name} | {w1:.2f} s | {w2:.2f} s | {r['scanned']:,} | {r['mode']} | "
            f"{int(r['vm_hwm_kib']) / 1024:.0f} MB | {r['cpu']:.2f} s | "  # type: ignore[call-overload]
            f"{r['redis_cpu']:.2f} s |"
        )
    if rounds > 1:
        for side in ("single server", "3-primary cluster"):
            walls = [r["walls"] for name, r in rows if name.startswith(side)]
            print(
                f"median of {rounds} rounds, {side}: scan 1 "
                f"{statistics.median(w[0] for w in walls):.2f} s, scan 2 "  # type: ignore[index]
                f"{statistics.median(w[1] for w in walls):.2f} s"
            )  # type: ignore[index]


if __name__ == "__main__":
    raise SystemExit(main())
