"""Budget-off scans through a simulated network: this checkout against another (`--bot-path`),
paired, with a proxy (`bench/delay_proxy.c`, built with gcc into a temporary directory) holding
every chunk for `--one-way-us` in each direction between lockguard and Redis.

    .venv/bin/python bench/rtt_bench.py --locks 100000 --one-way-us 250 --bot-path /tmp/old

Fills the server (`scan_bench.populate`), runs one scan of this checkout so that every lock has
a tenure record (the second scan's state), then `--rounds` pairs of scans, alternating which goes
first, each a child process (`probe_bench.py --child scan`, budget 1: unpaced). Prints each
scan's wall time, the server's CPU time and the child's, then the medians and their ratio.
`--one-way-us 0` connects straight to Redis. Not part of the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import scan_bench  # noqa: E402


def build_proxy(where: str) -> str:
    if shutil.which("gcc") is None:
        sys.exit("rtt_bench needs gcc to build bench/delay_proxy.c")
    out = os.path.join(where, "delay_proxy")
    subprocess.run(["gcc", "-O2", "-o", out, str(HERE / "delay_proxy.c")], check=True)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_cpu(server: scan_bench.Server) -> float:
    fields = Path(f"/proc/{server.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scan(server: scan_bench.Server, port: int, bot: str | None) -> tuple[float, float, float]:
    """One unpaced scan through `port`: its wall time, Redis's CPU and the child's CPU (s)."""
    env = dict(scan_bench.CHILD_ENV)
    env.pop("LOCKGUARD_BENCH_BOT_PATH", None)
    if bot:
        env["LOCKGUARD_BENCH_BOT_PATH"] = bot
    cmd = [sys.executable, str(HERE / "probe_bench.py"), "--child", "scan", str(port)]
    before, cpu = resource.getrusage(resource.RUSAGE_CHILDREN), server_cpu(server)
    proc = subprocess.run(
        [*cmd, "auto", "1000", "1.0"], stdout=subprocess.PIPE, env=env, cwd=scan_bench.ROOT
    )
    if proc.returncode != 0:
        sys.exit(f"the scan child failed with exit code {proc.returncode}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    child = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    wall = float(json.loads(proc.stdout.strip().splitlines()[-1])["wall"])
    return wall, server_cpu(server) - cpu, child


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locks", type=int, default=100_000)
    parser.add_argument("--one-way-us", type=int, default=250, help="0: no proxy")
    parser.add_argument("--bot-path", required=True, help="the other checkout (the 'before')")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    before = str(Path(args.bot_path).resolve())
    print(scan_bench.environment(), flush=True)
    server, proxy = scan_bench.Server(), None
    try:
        scan_bench.populate(server, args.locks, args.locks)
        port = server.port
        with tempfile.TemporaryDirectory() as tmp:
            if args.one_way_us > 0:
                port = free_port()
                binary = build_proxy(tmp)
                proxy = subprocess.Popen(
                    [binary, str(port), str(server.port), str(args.one_way_us)]
                )
                time.sleep(0.5)
            scan(server, port, None)  # every lock gets a tenure record
            runs: dict[str, list[tuple[float, float, float]]] = {"before": [], "this": []}
            for i in range(args.rounds):
                for name in ("before", "this") if i % 2 == 0 else ("this", "before"):
                    runs[name].append(scan(server, port, before if name == "before" else None))
                    wall, redis_s, client_s = runs[name][-1]
                    print(
                        f"{name}: {wall:.2f} s, Redis CPU {redis_s:.2f} s, client CPU "
                        f"{client_s:.2f} s",
                        flush=True,
                    )
    finally:
        if proxy is not None:
            proxy.kill()
        server.stop()
    med = {k: statistics.median(w for w, _, _ in v) for k, v in runs.items()}
    print(
        f"\n{args.locks:,} locks + {args.locks:,} others, one-way delay {args.one_way_us} us:"
        f" before {med['before']:.2f} s, this {med['this']:.2f} s, "
        f"ratio {med['this'] / med['before']:.2f}"
    )
    print("command: " + " ".join(["bench/rtt_bench.py", *sys.argv[1:]]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
