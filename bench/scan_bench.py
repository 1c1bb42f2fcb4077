"""Full-scan benchmark: lockguard's `run_scan` against a naive audit loop and `redis-cli --scan`.

    .venv/bin/python bench/scan_bench.py [--sizes 100000,1000000] [--sparse] [--naive-limit K]

For each scenario the script starts its own redis-server (free loopback port, no persistence),
fills it through `redis-cli --pipe` (not timed) with N lock keys of mixed layouts under `lock:*`
and as many other keys (`cache:*`, `session:*`), then runs, each in its own child process so that
its peak RSS is its own (read from `wait4`'s rusage):

- `lockguard scan 1`: `bot.scan.loop.run_scan`, first scan (every lease is new);
- `lockguard scan 2`: the same again, continuing the leases the first one wrote;
- `lockguard engine` (with `--engine`): a third scan the way the CLI runs it,
  `bot.cases.opening.scan_and_propose` with propose off: the scan with the Redisson collector
  (`on_redisson`), the deadlock check (`detect`) and the evidence read and record (`rank`,
  `record_ranked`), those timed apart; compare it with `lockguard scan 2` (the same keyspace,
  the leases continued, the evidence off);
- `naive loop`: SCAN COUNT 100 MATCH, then GET, TTL, OBJECT IDLETIME per key, one round trip each,
  the state as one JSON blob in a dict written back with one SET at the end;
- `redis-cli --scan`: `redis-cli -p PORT --scan --pattern 'lock:*' > /dev/null`.

`--sparse` adds a sparse keyspace: 2,000,000 other keys and 1,000 locks. Not part of the tests.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# `--bot-path DIR` (children only: LOCKGUARD_BENCH_BOT_PATH) times the `bot` package found in DIR
# instead, e.g. an export of an older commit, for before/after numbers on one machine.
sys.path.insert(0, os.environ.get("LOCKGUARD_BENCH_BOT_PATH") or str(ROOT))

PATTERN = "lock:*"
TTL_MIN_S, TTL_MAX_S = 2 * 3600, 4 * 3600  # nothing may expire while the benchmark runs
NAIVE_STATE_KEY = b"audit:naive:state"
CHILD_ENV = dict(os.environ)


# ---------------------------------------------------------------------------------------------
# redis-server and population


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            sys.exit("redis-server is not installed")
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="lockguard-bench-")
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while self.cli("PING") != "PONG":
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                sys.exit("redis-server did not start")
            time.sleep(0.05)

    def cpu_seconds(self) -> float:
        """CPU time redis-server has used so far (user + system), from /proc."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def cli(self, *args: str) -> str:
        res = subprocess.run(
            ["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True, check=False
        )
        return res.stdout.strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def _resp(*parts: bytes) -> bytes:
    out = [b"*%d\r\n" % len(parts)]
    for p in parts:
        out.append(b"$%d\r\n%s\r\n" % (len(p), p))
    return b"".join(out)


def _lock_commands(i: int, rnd: random.Random) -> list[bytes]:
    """One lock key of a mixed layout: 40% redis-py (uuid1 hex, PX), 30% python-redis-lock
    (24-char base64, EX), 10% no TTL, 19% Redisson hash (PEXPIRE), 1% counter (EX)."""
    ttl_s = rnd.randint(TTL_MIN_S, TTL_MAX_S)
    b = i % 100
    if b < 40:
        key = b"lock:job:%d" % i
        return [_resp(b"SET", key, uuid.uuid1().hex.encode(), b"PX", b"%d" % (ttl_s * 1000))]
    if b < 70:
        key = b"lock:report:%d" % i
        token = base64.b64encode(rnd.randbytes(18))
        return [_resp(b"SET", key, token, b"EX", b"%d" % ttl_s)]
    if b < 80:
        key = b"lock:legacy:%d" % i
        token = uuid.uuid1().hex.encode() if b % 2 else base64.b64encode(rnd.randbytes(18))
        return [_resp(b"SET", key, token)]
    if b < 99:
        key = b"lock:redisson:%d" % i
        holder = b"%s:%d" % (
            str(uuid.UUID(bytes=rnd.randbytes(16), version=4)).encode(),
            rnd.randint(1, 400),
        )
        return [_resp(b"HSET", key, holder, b"1"), _resp(b"PEXPIRE", key, b"%d" % (ttl_s * 1000))]
    key = b"lock:counter:%d" % i
    return [_resp(b"SET", key, b"%d" % rnd.randint(1, 50), b"EX", b"%d" % ttl_s)]


def _other_commands(i: int, rnd: random.Random) -> list[bytes]:
    if i % 4 == 3:
        key = b"session:%d" % i
        return [
            _resp(
                b"HSET",
                key,
                b"user",
                b"%d" % rnd.randint(1, 10**6),
                b"seen",
                b"%d" % rnd.randint(1, 10**9),
            )
        ]
    return [_resp(b"SET", b"cache:item:%d" % i, rnd.randbytes(24).hex().encode())]


def populate(server: Server, locks: int, others: int, seed: int = 7) -> float:
    started = time.monotonic()
    rnd = random.Random(seed)
    proc = subprocess.Popen(
        ["redis-cli", "-p", str(server.port), "--pipe"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdin is not None
    chunk: list[bytes] = []
    # Interleave locks and other keys so neither sits in one region of the hash table's history.
    total = max(locks, others)
    for i in range(total):
        if i < locks:
            chunk.extend(_lock_commands(i, rnd))
        if i < others:
            chunk.extend(_other_commands(i, rnd))
        if len(chunk) >= 20_000:
            proc.stdin.write(b"".join(chunk))
            chunk.clear()
    proc.stdin.write(b"".join(chunk))
    proc.stdin.close()
    out = proc.stdout.read().decode() if proc.stdout else ""
    proc.wait()
    if "errors: 0" not in out:
        sys.exit(f"population failed: {out}")
    return time.monotonic() - started


# ---------------------------------------------------------------------------------------------
# measured things, each run in a child process


def child_scan(port: int, mode: str, count: int) -> dict[str, object]:
    import redis

    try:
        from bot.scan.loop import run_scan
        from bot.scan.result import ScanOptions
    except ImportError:  # a checkout from before bot/scan/loop.py (--bot-path)
        from bot.engine import ScanOptions, run_scan  # type: ignore[no-redef]
    from bot.core.rules import Policy
    from bot.scan import ReadMode

    client = redis.Redis(host="127.0.0.1", port=port, decode_responses=False)
    client.ping()
    options = ScanOptions(
        patterns=[PATTERN.encode()],
        policy=Policy(stale_threshold_ms=900_000),
        scan_count=count,
        mode=ReadMode(mode),
    )
    started = time.perf_counter()
    result = run_scan(client, options)
    wall = time.perf_counter() - started
    summary = result.summary()
    return {
        "wall": wall,
        "keys": result.scanned,
        "summary": summary,
        **child_evidence(client, result),
    }


def child_engine(port: int, mode: str, count: int) -> dict[str, object]:
    """The scan as the CLI runs it (`scan_and_propose`, propose off), its post-scan steps timed."""
    import redis

    import bot.cases.deadlocks as deadlocks
    import bot.cases.opening as opening
    from bot.cases.reclaim_config import ReclaimConfig
    from bot.core.rules import Policy
    from bot.scan import ReadMode
    from bot.scan.result import ScanOptions

    spent = {"rank": 0.0, "record_ranked": 0.0, "detect": 0.0}

    def timed(module: object, name: str) -> None:
        inner = getattr(module, name)

        def wrapper(*a: object, **k: object) -> object:
            t0 = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                spent[name] += time.perf_counter() - t0

        setattr(module, name, wrapper)

    timed(opening, "rank")
    timed(opening, "record_ranked")
    timed(deadlocks, "detect")
    client = redis.Redis(host="127.0.0.1", port=port, decode_responses=False)
    client.ping()
    options = ScanOptions(
        patterns=[PATTERN.encode()],
        policy=Policy(stale_threshold_ms=900_000),
        scan_count=count,
        mode=ReadMode(mode),
    )
    started = time.perf_counter()
    result, _ = opening.scan_and_propose(client, options, ReclaimConfig(), propose=False)
    wall = time.perf_counter() - started
    return {"wall": wall, "keys": result.scanned, "summary": result.summary(), **spent}


def child_evidence(client: object, result: object) -> dict[str, object]:
    """The reads after the scan (`bot.evidence.rank`, as `Engine.scan` runs them), timed apart:
    on the scan's kept list, and at its worst: EVIDENCE_LIMIT findings all read as Redisson
    and BullMQ locks (channel subscribers, fair-lock queue, wait/paused/prioritized, CLIENT
    LIST). Empty for a checkout from before `bot.evidence` (--bot-path)."""
    from dataclasses import replace

    try:
        from bot.evidence import EVIDENCE_LIMIT, rank
    except ImportError:
        return {}
    from bot.core.model import Layout

    kept = list(result.worst)  # type: ignore[attr-defined]
    started = time.perf_counter()
    rank(client, kept)  # type: ignore[arg-type]
    on_kept = time.perf_counter() - started
    layouts = (Layout.REDISSON, Layout.BULLMQ)
    base = [f for f in kept if f.reason.value != "healthy"] or kept
    worst = (
        [
            replace(
                base[i % len(base)],
                key=b"bull:q%d:%d:lock" % (i % 7, i),
                layout=layouts[i % 2],
                reason=base[0].reason,
            )
            for i in range(EVIDENCE_LIMIT)
        ]
        if base
        else []
    )
    started = time.perf_counter()
    rank(client, worst)  # type: ignore[arg-type]
    at_limit = time.perf_counter() - started
    return {"evidence_kept_s": on_kept, "evidence_limit_s": at_limit, "evidence_n": len(worst)}


def child_naive(port: int, limit: int) -> dict[str, object]:
    """How hand-written audit scripts do it: one round trip per fact per key."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
    client.ping()
    started = time.perf_counter()
    raw = client.get(NAIVE_STATE_KEY)
    state: dict[str, dict[str, object]] = json.loads(raw) if raw else {}
    seen = 0
    cursor = 0
    done = True
    while True:
        cursor, keys = client.scan(cursor=cursor, match=PATTERN, count=100)
        for key in keys:
            try:
                value = client.get(key)
            except redis.ResponseError:  # WRONGTYPE: a hash lock
                value = None
            ttl = client.ttl(key)
            idle = client.object("idletime", key)
            entry = state.get(key)
            if entry is None or entry.get("value") != value:
                entry = {"value": value, "first_seen": time.time()}
                state[key] = entry
            entry["ttl"] = ttl
            entry["idle"] = idle
            entry["last_seen"] = time.time()
            seen += 1
        if limit and seen >= limit:
            done = False
            break
        if cursor == 0:
            break
    client.set(NAIVE_STATE_KEY, json.dumps(state))
    wall = time.perf_counter() - started
    return {"wall": wall, "keys": seen, "complete": done}


# Peak RSS is VmHWM, the high-water mark of the process's own memory since its exec. (wait4's
# ru_maxrss would not do: Linux carries the pre-exec high-water mark over an exec, so a child
# spawned by a big parent reports at least the parent's RSS.)


def vm_hwm_kib(pid: int | str = "self") -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_child(*args: str) -> tuple[dict[str, object], int]:
    """Run this script as a child doing one measured thing; its JSON result and peak RSS (KiB),
    which the child reads from its own /proc/self/status just before it exits."""
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--child", *args],
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env=CHILD_ENV,
    )
    out, _ = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f"child {args} failed with exit code {proc.returncode}")
    res = json.loads(out)
    return res, int(res["vm_hwm_kib"])


def run_redis_cli_scan(port: int, nice: int = 0) -> tuple[float, int]:
    """`redis-cli --scan` to /dev/null (at niceness `nice`): wall time, and its VmHWM polled
    every 10 ms."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        ["nice", "-n", str(nice), "redis-cli", "-p", str(port), "--scan", "--pattern", PATTERN],
        stdout=subprocess.DEVNULL,
    )
    hwm = 0
    while True:
        try:
            proc.wait(0.01)
            break
        except subprocess.TimeoutExpired:
            hwm = max(hwm, vm_hwm_kib(proc.pid))
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit("redis-cli --scan failed")
    return wall, hwm


# ---------------------------------------------------------------------------------------------
# scenarios and the table


@dataclass
class Row:
    scenario: str
    what: str
    wall: float
    keys: int
    rss_kib: int
    server_cpu: float = float("nan")
    note: str = ""

    @property
    def rate(self) -> float:
        return self.keys / self.wall if self.wall else 0.0


@dataclass
class Scenario:
    name: str
    locks: int
    others: int
    rows: list[Row] = field(default_factory=list)
    checks: list[tuple[str, bool]] = field(default_factory=list)


def run_scenario(sc: Scenario, args: argparse.Namespace) -> None:
    print(f"\n== {sc.name}: {sc.locks:,} locks + {sc.others:,} other keys", flush=True)
    server = Server()
    try:
        took = populate(server, sc.locks, sc.others)
        print(f"   populated in {took:.1f} s (dbsize {server.cli('DBSIZE')})", flush=True)
        scan_rows = []
        for n in (1, 2):
            cpu0 = server.cpu_seconds()
            res, rss = run_child("scan", str(server.port), args.mode, str(args.count))
            cpu = server.cpu_seconds() - cpu0
            wall, keys = float(res["wall"]), int(res["keys"])
            if keys != sc.locks:
                print(f"   WARNING: scan {n} classified {keys} keys, expected {sc.locks}")
            reasons = res["summary"]["by_reason"]  # type: ignore[index]
            row = Row(
                sc.name,
                f"lockguard scan {n}",
                wall,
                keys,
                rss,
                cpu,
                f"{res['summary']['read_mode']} read",
            )  # type: ignore[index]
            print(
                f"   {row.what}: {wall:.2f} s, {rss / 1024:.0f} MB, {reasons} ({res['bot']})",
                flush=True,
            )
            if "evidence_limit_s" in res:
                kept_s, limit_s = float(res["evidence_kept_s"]), float(res["evidence_limit_s"])  # type: ignore[arg-type]
                print(
                    f"   evidence after {row.what}: {kept_s * 1000:.1f} ms on its kept list, "
                    f"{limit_s * 1000:.1f} ms for {res['evidence_n']} Redisson/BullMQ findings "
                    f"({limit_s / wall:.2%} of the scan)",
                    flush=True,
                )
            sc.rows.append(row)
            scan_rows.append(row)
        if args.engine:
            cpu0 = server.cpu_seconds()
            res, rss = run_child("engine", str(server.port), args.mode, str(args.count))
            cpu = server.cpu_seconds() - cpu0
            wall, keys = float(res["wall"]), int(res["keys"])
            post = {k: float(res[k]) for k in ("detect", "rank", "record_ranked")}  # type: ignore[arg-type]
            extra = sum(post.values())
            off = scan_rows[-1].wall
            note = f"deadlocks+evidence {extra * 1000:.0f} ms = {extra / wall:.2%}"
            row = Row(sc.name, "lockguard engine", wall, keys, rss, cpu, note)
            print(
                f"   {row.what}: {wall:.2f} s, {rss / 1024:.0f} MB; detect "
                f"{post['detect'] * 1000:.1f} ms, rank {post['rank'] * 1000:.1f} ms, "
                f"record_ranked {post['record_ranked'] * 1000:.1f} ms: {extra / wall:.2%} of "
                f"the scan; evidence off (scan 2) {off:.2f} s, on {wall:.2f} s "
                f"({(wall - off) / off:+.1%})",
                flush=True,
            )
            sc.rows.append(row)
            sc.checks.append(
                (f"deadlocks+evidence {extra / wall:.2%} of the scan <= 10%", extra <= 0.1 * wall)
            )
        if args.naive_limit >= 0:
            cpu0 = server.cpu_seconds()
            res, rss = run_child("naive", str(server.port), str(args.naive_limit))
            cpu = server.cpu_seconds() - cpu0
            wall, keys = float(res["wall"]), int(res["keys"])
            note = ""
            if not res["complete"]:
                note = f"extrapolated from {keys:,} keys"
                wall = wall * sc.locks / keys
                cpu = cpu * sc.locks / keys
                keys = sc.locks
            server.cli("UNLINK", NAIVE_STATE_KEY.decode())
            row = Row(sc.name, "naive loop", wall, keys, rss, cpu, note)
            print(f"   naive loop: {wall:.2f} s {note}", flush=True)
            sc.rows.append(row)
        else:
            row = None
        cli_walls, cli_cpu = [], []
        for _ in range(args.cli_runs):
            cpu0 = server.cpu_seconds()
            wall, rss = run_redis_cli_scan(server.port)
            cli_cpu.append(server.cpu_seconds() - cpu0)
            cli_walls.append(wall)
        best = min(range(len(cli_walls)), key=cli_walls.__getitem__)
        cli_row = Row(
            sc.name,
            "redis-cli --scan",
            cli_walls[best],
            sc.locks,
            rss,
            cli_cpu[best],
            f"best of {len(cli_walls)}" if len(cli_walls) > 1 else "",
        )
        print(f"   redis-cli --scan: {', '.join(f'{w:.2f}' for w in cli_walls)} s", flush=True)
        sc.rows.append(cli_row)
        worst = max(r.wall for r in scan_rows)
        peak = max(r.rss_kib for r in scan_rows)
        sc.checks.append((f"scan peak RSS {peak / 1024:.0f} MB < 300 MB", peak < 300 * 1024))
        if sc.name.startswith("sparse"):
            sc.checks.append(
                (
                    f"scan {worst:.2f} s < redis-cli --scan {cli_row.wall:.2f} s",
                    worst < cli_row.wall,
                )
            )
        else:
            ratio = worst / cli_row.wall
            sc.checks.append((f"scan / redis-cli --scan = {ratio:.2f} <= 1.5", ratio <= 1.5))
            if row is not None:
                speedup = row.wall / worst
                sc.checks.append((f"naive / scan = {speedup:.1f}x >= 15x", speedup >= 15))
    finally:
        server.stop()


def environment() -> str:
    import platform

    import redis
    from redis.utils import HIREDIS_AVAILABLE

    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(
                (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?"
            )
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    server = subprocess.run(
        ["redis-server", "--version"], capture_output=True, text=True, check=False
    ).stdout.split()
    version = next((w.split("=", 1)[1] for w in server if w.startswith("v=")), "?")
    try:
        import hiredis

        parser = f"hiredis {hiredis.__version__}" if HIREDIS_AVAILABLE else "pure Python (!)"
    except ImportError:
        parser = "pure Python (!)"
    return (
        f"nproc {os.cpu_count()} ({cpu}), {mem_gb:.0f} GB RAM, {platform.system()} "
        f"{platform.release()}; redis-server {version}; Python {platform.python_version()}, "
        f"redis-py {redis.__version__}, reply parser {parser}"
    )


def print_table(scenarios: list[Scenario]) -> str:
    lines = [
        "| keyspace | what | wall (s) | locks/s | peak RSS (MB) | redis-server CPU (s) | note |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for sc in scenarios:
        label = f"{sc.name} ({sc.locks:,} locks + {sc.others:,} others)"
        for r in sc.rows:
            lines.append(
                f"| {label} | {r.what} | {r.wall:.2f} | {r.rate:,.0f} | "
                f"{r.rss_kib / 1024:.0f} | {r.server_cpu:.1f} | {r.note} |"
            )
    lines.append("")
    for sc in scenarios:
        for text, ok in sc.checks:
            lines.append(f"- {sc.name}: {text}: {'PASS' if ok else 'FAIL'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="100000,1000000",
        help="comma-separated lock counts (each with as many other keys); "
        "'none' for no dense scenario",
    )
    parser.add_argument(
        "--sparse",
        action="store_true",
        help="also the sparse keyspace: 2,000,000 other keys, 1,000 locks",
    )
    parser.add_argument(
        "--naive-limit",
        type=int,
        default=0,
        help="0: run the naive loop over every key (default); K > 0: stop after "
        "K keys and extrapolate; -1: skip it",
    )
    parser.add_argument(
        "--cli-runs",
        type=int,
        default=1,
        help="redis-cli --scan runs per scenario (the best is reported)",
    )
    parser.add_argument("--mode", default="auto", choices=["auto", "lua", "pipeline"])
    parser.add_argument("--count", type=int, default=1000, help="SCAN COUNT for lockguard")
    parser.add_argument(
        "--bot-path",
        help="import `bot` from this directory in the measured children (default: this checkout)",
    )
    parser.add_argument(
        "--engine",
        action="store_true",
        help="also a scan the way the CLI runs it (scan_and_propose: deadlocks and evidence)",
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bot_path:
        CHILD_ENV["LOCKGUARD_BENCH_BOT_PATH"] = str(Path(args.bot_path).resolve())

    if args.child:
        kind, port, *rest = args.child
        if kind == "scan":
            res = child_scan(int(port), rest[0], int(rest[1]))
        elif kind == "engine":
            res = child_engine(int(port), rest[0], int(rest[1]))
        else:
            res = child_naive(int(port), int(rest[0]))
        res["vm_hwm_kib"] = vm_hwm_kib()
        bot = sys.modules.get("bot")
        res["bot"] = str(Path(bot.__file__ or "?").parent) if bot is not None else ""
        print(json.dumps(res))
        return 0

    print(environment(), flush=True)
    scenarios = []
    if args.sizes != "none":
        for size in args.sizes.split(","):
            n = int(size.replace("_", ""))
            scenarios.append(Scenario(f"{n:,} locks", n, n))
    if args.sparse:
        scenarios.append(Scenario("sparse", 1_000, 2_000_000))
    for sc in scenarios:
        run_scenario(sc, args)
    print()
    print(environment())
    print("command: " + " ".join(["bench/scan_bench.py", *sys.argv[1:]]))
    print()
    print(print_table(scenarios))
    return 0 if all(ok for sc in scenarios for _, ok in sc.checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
