"""Probe benchmark: how much slower the application's own requests get while lockguard scans.

    .venv/bin/python bench/probe_bench.py [--sizes 300000] [--others N] [--bot-path DIR]

For each size the script starts its own redis-server (free loopback port, `--save ''
--appendonly no`), fills it (`scan_bench.populate`: N locks of mixed layouts and as many other
keys), sets `slowlog-log-slower-than 1000` (1 ms) and `slowlog-max-len 100000`, and then, for each
phase, runs a probe client (a child process doing one `GET` every 0.5 ms on its own connection,
timing each round trip) while one thing runs:

- `idle`: nothing, for as long as the lockguard scan took (at least 3 s);
- `redis-cli --scan`: `redis-cli --scan --pattern 'lock:*' > /dev/null`;
- `lockguard scan 1` and `lockguard scan 2`: `bot.scan.loop.run_scan` in a child process
  (`scan_bench.child_scan`), first scan and the one continuing its leases.

Per phase: the probe's p50 / p99 / max, and the SLOWLOG entries the phase left over 1 ms and over
2 ms, with the slowest command names: the commands clients sent, not the probe's own nor those
run inside a script (Redis 7 logs those too; their time is part of the script's). PASS/FAIL
against the targets: no lockguard command over 2 ms, probe p99 while lockguard scans within
+1 ms of the p99 while redis-cli lists, and the scan no slower than the listing. Not part of
the tests.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scan_bench

PROBE_EVERY_S = 0.0005
SLOWLOG_MAX = 100_000


def child_probe(port: int) -> dict[str, object]:
    """GET every 0.5 ms until SIGTERM; the round trips' p50 / p99 / max in ms."""
    import redis

    stop = False

    def on_term(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    client = redis.Redis(
        host="127.0.0.1", port=port, single_connection_client=True, client_name="probe"
    )
    client.ping()
    print("ready", flush=True)
    times: list[float] = []
    clock = time.perf_counter
    next_at = clock()
    while not stop:
        t0 = clock()
        client.get(b"probe:key")
        times.append(clock() - t0)
        next_at += PROBE_EVERY_S
        pause = next_at - clock()
        if pause > 0:
            time.sleep(pause)
        else:
            next_at = clock()
    times.sort()
    n = len(times)

    def pct(p: float) -> float:
        return times[min(n - 1, int(p * n))] * 1000 if n else float("nan")

    return {"n": n, "p50": pct(0.50), "p99": pct(0.99), "max": times[-1] * 1000 if n else 0.0}


class Probe:
    def __init__(self, port: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--child", "probe", str(port)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            sys.exit("the probe did not start")
        time.sleep(0.2)

    def stop(self) -> dict[str, float]:
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate()
        return dict(json.loads(out.strip().splitlines()[-1]))


@dataclass
class Phase:
    what: str
    wall: float
    probe: dict[str, float]
    over1: int
    over2: int
    slowest: str

    def row(self) -> str:
        p = self.probe
        return (
            f"| {self.what} | {self.wall:.2f} | {p['p50']:.2f} | {p['p99']:.2f} | "
            f"{p['max']:.1f} | {self.over1} | {self.over2} | {self.slowest} |"
        )


def slowlog(server: scan_bench.Server) -> tuple[int, int, str]:
    """Commands over 1 ms and over 2 ms since the last reset, and the slowest of each name. Only
    the commands clients sent: not the probe's own, not those a script ran (Redis 7 logs those
    too, from client `?:0`: their time is already in the script's)."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=server.port)
    entries = client.slowlog_get(SLOWLOG_MAX)
    client.slowlog_reset()
    client.close()

    def sent(e: dict[str, object]) -> bool:
        return e.get("client_name") != b"probe" and e.get("client_address") != b"?:0"

    over1 = [e for e in entries if e["duration"] > 1000 and sent(e)]
    over2 = [e for e in over1 if e["duration"] > 2000]
    by_name: dict[str, int] = {}
    for e in over1:
        name = bytes(e["command"]).split(b" ", 1)[0].decode(errors="replace").upper()
        by_name[name] = max(by_name.get(name, 0), int(e["duration"]))
    slowest = ", ".join(f"{k} up to {v / 1000:.1f} ms" for k, v in sorted(by_name.items()))
    return len(over1), len(over2), slowest or "-"


def measured(server: scan_bench.Server, what: str, run: object) -> Phase:
    slowlog(server)  # reset
    probe = Probe(server.port)
    started = time.perf_counter()
    wall = run() if callable(run) else 0.0
    wall = wall or time.perf_counter() - started
    stats = probe.stop()
    over1, over2, slowest = slowlog(server)
    phase = Phase(what, wall, stats, over1, over2, slowest)
    print("   " + phase.row(), flush=True)
    return phase


def run_size(locks: int, others: int, args: argparse.Namespace) -> tuple[list[Phase], bool]:
    print(f"\n== {locks:,} locks + {others:,} other keys", flush=True)
    server = scan_bench.Server()
    try:
        took = scan_bench.populate(server, locks, others)
        print(f"   populated in {took:.1f} s (dbsize {server.cli('DBSIZE')})", flush=True)
        server.cli("CONFIG", "SET", "slowlog-log-slower-than", "1000")
        server.cli("CONFIG", "SET", "slowlog-max-len", str(SLOWLOG_MAX))
        phases: list[Phase] = []

        def scan() -> float:
            res, _ = scan_bench.run_child("scan", str(server.port), args.mode, str(args.count))
            if int(res["keys"]) != locks:
                print(f"   WARNING: the scan classified {res['keys']} keys, expected {locks}")
            return float(res["wall"])

        def cli() -> float:
            return scan_bench.run_redis_cli_scan(server.port)[0]

        phases.append(measured(server, "lockguard scan 1", scan))
        phases.append(measured(server, "lockguard scan 2", scan))
        phases.append(measured(server, "redis-cli --scan", cli))
        idle_s = max(3.0, phases[0].wall)
        phases.insert(0, measured(server, "idle", lambda: time.sleep(idle_s)))
    finally:
        server.stop()
    return phases, report(locks, others, phases)


def report(locks: int, others: int, phases: list[Phase]) -> bool:
    print(f"\n{locks:,} locks + {others:,} others")
    print(
        "| while this runs | wall (s) | probe p50 (ms) | probe p99 (ms) | probe max (ms) "
        "| SLOWLOG > 1 ms | > 2 ms | slowest |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for p in phases:
        print(p.row())
    cli = next(p for p in phases if p.what == "redis-cli --scan")
    scans = [p for p in phases if p.what.startswith("lockguard")]
    checks = [
        (
            f"lockguard commands over 2 ms: {sum(p.over2 for p in scans)} (target 0)",
            all(p.over2 == 0 for p in scans),
        ),
        (
            f"scan p99 {max(p.probe['p99'] for p in scans):.2f} ms <= redis-cli's "
            f"{cli.probe['p99']:.2f} ms + 1 ms",
            all(p.probe["p99"] <= cli.probe["p99"] + 1.0 for p in scans),
        ),
        (
            f"scan {max(p.wall for p in scans):.2f} s <= redis-cli --scan {cli.wall:.2f} s",
            all(p.wall <= cli.wall for p in scans),
        ),
    ]
    for text, ok in checks:
        print(f"- {text}: {'PASS' if ok else 'FAIL'}")
    return all(ok for _, ok in checks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="300000", help="comma-separated lock counts")
    parser.add_argument("--others", type=int, help="other keys (default: as many as locks)")
    parser.add_argument("--mode", default="auto", choices=["auto", "lua", "pipeline"])
    parser.add_argument("--count", type=int, default=1000, help="SCAN COUNT for lockguard")
    parser.add_argument("--bot-path", help="import `bot` from this directory in the scan child")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child_probe(int(args.child[1]))))
        return 0
    if args.bot_path:
        scan_bench.CHILD_ENV["LOCKGUARD_BENCH_BOT_PATH"] = str(Path(args.bot_path).resolve())
    print(scan_bench.environment(), flush=True)
    ok = True
    for size in args.sizes.split(","):
        n = int(size.replace("_", ""))
        ok = run_size(n, args.others if args.others is not None else n, args)[1] and ok
    print("command: " + " ".join(["bench/probe_bench.py", *sys.argv[1:]]))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
