"""The bounds of `bench/probe_bench.py` on every primary of a Redis Cluster scan
(`bench/cluster_bench.py --bounds`, which fills the cluster and calls `bounds`).

Each primary's SLOWLOG sized to hold everything (`slowlog-log-slower-than 1000`,
`slowlog-max-len 100000`), and a probe client (`probe_client.Probe`: one GET every 0.5 ms, p50 /
p99 / max) on one primary (the one serving `probe:key`'s slot), for each phase:

- `idle`: nothing, 3 s;
- `redis-cli --scan`: `redis-cli -c -p PORT --scan --pattern 'lock:*'` against every primary at
  once (one listing per primary, together the cluster's keys);
- `lockguard scan 1` / `scan 2` at the budget (`--budget`, the setting's default), `scan 3` with
  the budget off: one `run_scan` on the cluster each, in a child process;
- `control: TIME-only`: the machine's floor (`bench/machine_stalls.py`), scripts that only call
  `TIME` on every primary at once, at scan 1's share for as long, a CPU kept busy: its commands
  over 2 ms are stalls no command avoids, printed beside the bound (not a check).

The scan child and redis-cli run at `nice -n 10` (the client on a host of its own, as
`probe_bench.py --client-nice` models it). Per phase and primary: the commands over 1 ms and over
2 ms that clients sent (`probe_bench.slowlog`: not the probe's, not those run inside a script,
client `?:0`), the slowest of each name, and the server time Redis counted for the phase's own
commands (`INFO commandstats` deltas: EVALSHA + HSET for lockguard, SCAN for redis-cli) over the
phase's wall time, and how long each primary waited for a CPU (`runqueue_s`: SLOWLOG counts
that wait in a command's time, so more busy primaries than cores inflate it). PASS/FAIL per
bound, at the budget: no lockguard command over 2 ms on any primary, probe p99 while lockguard
scans within +1 ms of the p99 while redis-cli lists, and each primary's lockguard share of Redis
within the budget. Not part of the tests.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import machine_stalls  # noqa: E402  (bench/ is not a package)
import probe_bench  # noqa: E402
import probe_client  # noqa: E402
import scan_bench  # noqa: E402

PATTERN = b"lock:*"
NICE = ["nice", "-n", "10"]


class At:
    """A primary by port, as `probe_bench.slowlog` and `server_usec` take a server."""

    def __init__(self, port: int) -> None:
        self.port = port


def child_bounded(port: int, budget: float) -> None:
    """One `run_scan` on the cluster at `budget`: its wall time, keys and paced share."""
    from dataclasses import replace

    from redis.cluster import RedisCluster

    from bot.core.rules import Policy
    from bot.scan.loop import run_scan
    from bot.scan.result import ScanOptions

    client = RedisCluster(host="127.0.0.1", port=port)
    options = ScanOptions(patterns=[PATTERN], policy=Policy(stale_threshold_ms=900_000))
    options = replace(options, budget=budget)
    started = time.perf_counter()
    result = run_scan(client, options)
    wall = time.perf_counter() - started
    paced = result.summary().get("paced")
    fraction = paced.get("fraction") if isinstance(paced, dict) else None
    print(json.dumps({"wall": wall, "keys": result.scanned, "paced": fraction}))


def bounded_scan(port: int, budget: float, locks: int) -> tuple[float, float | None]:
    out = subprocess.run(
        [*NICE, sys.executable, __file__, "--child", "bounded", str(port), str(budget)],
        check=True,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env=scan_bench.CHILD_ENV,
    ).stdout
    res = json.loads(out.strip().splitlines()[-1])
    if res["keys"] != locks:
        print(f"   WARNING: the scan classified {res['keys']} keys, expected {locks}")
    return float(res["wall"]), res["paced"]


def cli_listing(ports: list[int]) -> tuple[float, None]:
    """`redis-cli -c --scan` on every primary at once, niced; the wall time until all end."""
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [*NICE, "redis-cli", "-c", "-p", str(p), "--scan", "--pattern", PATTERN.decode()],
            stdout=subprocess.DEVNULL,
        )
        for p in ports
    ]
    if any(proc.wait() != 0 for proc in procs):
        sys.exit("redis-cli --scan failed")
    return time.perf_counter() - started, None


def runqueue_s(port: int) -> float:
    """Seconds the redis-server on `port` has spent runnable but waiting for a CPU
    (/proc/PID/schedstat, field 2): a command's SLOWLOG time includes any such wait, so a
    machine with fewer cores than busy primaries (plus client and probe) inflates it."""
    with redis.Redis(port=port) as c:
        pid = int(c.info("server")["process_id"])
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return float("nan")


@dataclass
class BoundsPhase:
    what: str
    wall: float
    paced: float | None
    probe: dict[str, float]
    #: port -> (> 1 ms, > 2 ms, slowest, server s, s the server waited for a CPU)
    nodes: dict[int, tuple[int, int, str, float, float]]

    def rows(self) -> list[str]:
        p, paced = self.probe, "-" if self.paced is None else f"{self.paced:.0%}"
        out = []
        for port, (over1, over2, slowest, server_s, waited) in self.nodes.items():
            out.append(
                f"| {self.what} | {port} | {self.wall:.2f} | {p['p50']:.2f} | {p['p99']:.2f} | "
                f"{p['max']:.1f} | {over1} | {over2} | {server_s * 1000:.0f} "
                f"({server_s / self.wall:.0%}) | {waited * 1000:.0f} | {paced} | {slowest} |"
            )
        return out


def bounds_phase(
    what: str, ports: list[int], probe_port: int, run: Callable[[], tuple[float, float | None]]
) -> BoundsPhase:
    own = next((c for k, c in probe_bench.OWN_COMMANDS.items() if what.startswith(k)), ())
    before, queued = {}, {}
    for port in ports:
        probe_bench.slowlog(At(port))  # type: ignore[arg-type]  # reset
        before[port] = probe_bench.server_usec(At(port), own)  # type: ignore[arg-type]
        queued[port] = runqueue_s(port)
    probe = probe_client.Probe(probe_port)
    wall, paced = run()
    stats = probe.stop()
    nodes = {}
    for port in ports:
        over1, over2, slowest = probe_bench.slowlog(At(port))  # type: ignore[arg-type]
        server_s = probe_bench.server_usec(At(port), own) - before[port]  # type: ignore[arg-type]
        nodes[port] = (over1, over2, slowest, server_s, runqueue_s(port) - queued[port])
    phase = BoundsPhase(what, wall, paced, stats, nodes)
    for row in phase.rows():
        print("   " + row, flush=True)
    return phase


def bounds(ports: list[int], probe_port: int, entry: int, args: argparse.Namespace) -> bool:
    for port in ports:
        with redis.Redis(port=port) as c:
            c.config_set("slowlog-log-slower-than", 1000)
            c.config_set("slowlog-max-len", probe_bench.SLOWLOG_MAX)
    at = f"budget {args.budget:g}"
    print(f"\nbounds: probe on primary {probe_port} (serves probe:key's slot)", flush=True)
    phases = [bounds_phase("idle", ports, probe_port, lambda: (time.sleep(3.0) or 3.0, None))]
    phases.append(bounds_phase("redis-cli --scan", ports, probe_port, lambda: cli_listing(ports)))
    for name, budget in (("scan 1", args.budget), ("scan 2", args.budget), ("scan 3", 1.0)):
        what = f"lockguard {name} ({at if budget < 1 else 'budget off'})"
        phases.append(
            bounds_phase(
                what, ports, probe_port, lambda b=budget: bounded_scan(entry, b, args.locks)
            )
        )
    phases.append(_control(phases[2], ports, probe_port))
    print(
        "\n| while this runs | primary | wall (s) | probe p50 (ms) | probe p99 (ms) "
        "| probe max (ms) | SLOWLOG > 1 ms | > 2 ms | server ms (share) | CPU wait ms | paced "
        "| slowest |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for phase in phases:
        print("\n".join(phase.rows()))
    return verdict(phases, args.budget)


def _control(scan1: BoundsPhase, ports: list[int], probe_port: int) -> BoundsPhase:
    """The machine's floor (`machine_stalls.spin_controls`): TIME-only scripts on every primary
    at once, at scan 1's largest share of a primary, for as long as scan 1, a CPU kept busy as
    the scanner keeps it."""
    share = max(server_s / scan1.wall for *_, server_s, _ in scan1.nodes.values())
    return bounds_phase(
        f"control: TIME-only at {share:.0%}, a CPU busy",
        ports,
        probe_port,
        lambda: (machine_stalls.spin_controls(ports, share, scan1.wall, 10), None),
    )


def verdict(phases: list[BoundsPhase], budget: float) -> bool:
    cli = next(p for p in phases if p.what == "redis-cli --scan")
    scans = [p for p in phases if p.what.startswith("lockguard") and "budget off" not in p.what]
    over2 = {port: sum(p.nodes[port][1] for p in scans) for port in cli.nodes}
    share = {port: max(p.nodes[port][3] / p.wall for p in scans) for port in cli.nodes}
    p99 = max(p.probe["p99"] for p in scans)
    checks = [
        (
            "lockguard commands over 2 ms per primary: "
            + ", ".join(f"{port}: {n}" for port, n in over2.items())
            + " (target 0)",
            not any(over2.values()),
        ),
        (
            f"scan p99 {p99:.2f} ms <= redis-cli's {cli.probe['p99']:.2f} ms + 1 ms",
            p99 <= cli.probe["p99"] + 1.0,
        ),
        (
            "lockguard's share of each primary (INFO commandstats) "
            + ", ".join(f"{port}: {s:.0%}" for port, s in share.items())
            + f" <= the budget {budget:.0%}",
            all(s <= budget for s in share.values()),
        ),
    ]
    for text, ok in checks:
        print(f"- {text}: {'PASS' if ok else 'FAIL'}")
    for p in (p for p in phases if p.what.startswith("control")):
        nodes = p.nodes.items()
        print(
            f"- the machine's floor: scripts that only call TIME ({machine_stalls.SPIN_US} us "
            "each) on every primary at scan 1's share for as long left, per primary, "
            + ", ".join(f"{port}: {n[1]} over 2 ms ({n[0]} over 1 ms)" for port, n in nodes)
            + " (they read nothing and allocate nothing: stalls no command avoids)"
        )
    return all(ok for _, ok in checks)


if __name__ == "__main__":  # the scan child: --child bounded PORT BUDGET
    child_bounded(int(sys.argv[3]), float(sys.argv[4]))
