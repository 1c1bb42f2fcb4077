"""Fleet benchmark: one lockguard over K local redis-servers (issue 21, item 6).

    .venv/bin/python bench/fleet_bench.py [--targets 50] [--locks 10000] [--serve 3]

Starts K redis-servers (free loopback ports, no persistence), fills each through `redis-cli
--pipe` with L locks of `scan_bench.py`'s mix and L/5 other keys (scan_bench's own code), puts a
password on every 10th (given to lockguard through a `password_file`), and writes a targets file
(labels team=a / team=b). Then, each run a child process measured from here (wall, CPU from
`wait4`, peak RSS = the child's VmHWM and peak thread count, both sampled from /proc):

- CLI mode: `lockguard scan --json` over the fleet at each LOCKGUARD_TARGET_CONCURRENCY
  (`--concurrency 1,8,16`), over its first 10 targets (threads and memory must not grow with K),
  with 5 servers frozen (SIGSTOP: each hangs until its Redis timeout), and with 5 killed
  (`--faults N`: N of each; 0: neither).
- serve mode (`--serve MINUTES`): `lockguard serve` with every target on `every 1m`, Slack being
  the stand-in of `bot/demo/standin.py`; RSS, threads and CPU sampled every second; scans per
  target from `/metrics` (`lockguard_scans_total{target=...,trigger="schedule"}`).

Ends with a table and PASS/FAIL lines (exit 1 if any fails). Every server is stopped on exit, also
on Ctrl-C or SIGTERM. Not part of the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import scan_bench  # noqa: E402  (bench/ is not a package)
from fleet_processes import CHILDREN, Fleet, Run, child_env, measure, spawn  # noqa: E402

#: Threads `lockguard scan` may have beyond its LOCKGUARD_TARGET_CONCURRENCY workers: the main
#: thread, and one spare.
SCAN_FIXED_THREADS = 2
#: serve's threads whatever K: its pools' caps (the targets' jobs 8 + APScheduler's own 1, the
#: lease heartbeat 8 + 1, the health checks 8 + 1: bot/serve/fleet_operations.py; Slack work 8,
#: replays 4) and a few single threads (main, HTTP server, reposter, a release lease).
SERVE_THREADS = 9 + 9 + 9 + 8 + 4 + 5
TOKEN, SECRET, CHANNEL = "xoxb-fleet-bench-token", "fleet-bench-signing-secret", "C0FLEET"


def cli_run(name: str, targets: Path, concurrency: int, args: argparse.Namespace) -> Run:
    """`lockguard scan --json` over the targets file, measured; its per-target results."""
    env = child_env(
        args.bot_root,
        LOCKGUARD_TARGETS_FILE=str(targets),
        LOCKGUARD_TARGET_CONCURRENCY=str(concurrency),
        LOCKGUARD_REDIS_TIMEOUT_SECONDS=str(args.timeout),
    )
    out = targets.parent / (re.sub(r"\W+", "-", name) + ".json")
    run = Run(name)
    argv = [sys.executable, "-m", "bot", "scan", "--json"]
    measure(run, spawn(argv, args.bot_root, env, out), 0.01)
    try:
        parts = json.loads(out.read_text())["targets"]
    except (OSError, ValueError, KeyError) as exc:
        err = out.with_suffix(".err").read_text()[-2000:]
        sys.exit(f"{name}: no scan --json output ({exc}); exit {run.exit_code}; stderr: {err}")
    run.targets_ok = sum(p["status"] == "ok" for p in parts)
    run.targets_error = sum(p["status"] == "error" for p in parts)
    run.findings = sum(int(p.get("finding_count", 0)) for p in parts)
    run.errors = {p["name"]: str(p["error"]) for p in parts if p["status"] == "error"}
    short = [p["name"] for p in parts if p["status"] == "ok" and p["scanned"] != args.locks]
    run.note = f"scanned != {args.locks:,}: {', '.join(short)}" if short else ""
    print(
        f"   {name}: {run.wall:.2f} s, exit {run.exit_code}, {run.targets_ok} ok, "
        f"{run.targets_error} error, {run.threads} threads, {run.hwm_kib / 1024:.0f} MB",
        flush=True,
    )
    return run


Check = tuple[str, bool]


def cli_mode(fleet: Fleet, args: argparse.Namespace) -> tuple[list[Run], list[Check]]:
    k = len(fleet.servers)
    every = fleet.targets_file("targets.yaml")
    runs = [cli_run(f"scan --json, concurrency {c}", every, c, args) for c in args.concurrency]
    checks: list[Check] = []
    for run, c in zip(runs, args.concurrency, strict=True):
        bound = min(c, k) + SCAN_FIXED_THREADS
        checks.append((f"{run.name}: peak threads {run.threads} <= {bound}", run.threads <= bound))
        fine = run.exit_code in (0, 1) and run.targets_ok == k and not run.note
        checks.append(
            (
                f"{run.name}: exit {run.exit_code}, {run.targets_ok}/{k} ok, "
                f"each scanned all {args.locks:,} locks",
                fine,
            )
        )
        mb = run.hwm_kib / 1024
        checks.append(
            (f"{run.name}: peak RSS {mb:.0f} MB <= {args.rss_bound_mb} MB", mb <= args.rss_bound_mb)
        )
    small_k = min(10, k)
    small = cli_run(
        f"scan --json, first {small_k} targets, concurrency 8",
        fleet.targets_file("small.yaml", small_k),
        8,
        args,
    )
    runs.append(small)
    at8 = next((r for r, c in zip(runs, args.concurrency, strict=False) if c == 8), None)
    if at8 is not None:
        checks.append(
            (
                f"threads at concurrency 8: {small.threads} with {small_k} targets, "
                f"{at8.threads} with {k} (not growing with K)",
                at8.threads <= small.threads,
            )
        )
        grow = (at8.hwm_kib - small.hwm_kib) / 1024
        checks.append(
            (
                f"RSS at concurrency 8: {small.hwm_kib / 1024:.0f} MB with {small_k} "
                f"targets, {at8.hwm_kib / 1024:.0f} MB with {k}: +{grow:.0f} MB "
                f"<= {args.per_target_mb} MB x {k - small_k} targets",
                grow <= args.per_target_mb * (k - small_k),
            )
        )
    return runs, checks


def faults(fleet: Fleet, every: Path, args: argparse.Namespace, checks: list[Check]) -> list[Run]:
    """`--faults` servers (5) frozen (SIGSTOP: each answers nothing until its Redis timeout),
    then as many others killed (refused at once): every other target still scanned, exit 3."""
    k, n = len(fleet.servers), args.faults
    out = []
    for how, chosen in (("frozen", range(k - 2 * n, k - n)), ("killed", range(k - n, k))):
        sig = signal.SIGSTOP if how == "frozen" else signal.SIGKILL
        for i in chosen:
            os.kill(fleet.servers[i].proc.pid, sig)
        if how == "killed":
            for i in chosen:
                fleet.servers[i].proc.wait()
        run = cli_run(f"scan --json, {n} servers {how}, concurrency 8", every, 8, args)
        if how == "frozen":
            for i in chosen:
                os.kill(fleet.servers[i].proc.pid, signal.SIGCONT)
        names = {f"t{i:02d}" for i in chosen}
        fine = (
            run.exit_code == 3
            and set(run.errors) == names
            and run.targets_ok == k - n
            and not run.note
        )
        checks.append(
            (
                f"{run.name}: exit {run.exit_code}, errors on exactly the {how} "
                f"{n}, the other {run.targets_ok} scanned in full",
                fine,
            )
        )
        bound = 8 + SCAN_FIXED_THREADS
        checks.append((f"{run.name}: peak threads {run.threads} <= {bound}", run.threads <= bound))
        kinds = {re.sub(r"redis://\S+|127\.0\.0\.1:\d+", "<addr>", e) for e in run.errors.values()}
        run.note = (run.note + " errors: " + "; ".join(sorted(kinds))[:120]).strip()
        out.append(run)
    return out


def serve_run(name: str, fleet: Fleet, count: int, minutes: float, root: Path) -> Run:
    """`lockguard serve` over the first `count` targets, each `every 1m`, for `minutes`."""
    from bot.demo.embedded import free_port
    from bot.demo.standin import SlackStandIn

    targets = fleet.targets_file(f"serve-{count}.yaml", count, schedule="every 1m")
    port = free_port()
    run = Run(name)
    with SlackStandIn(strict=False) as slack:
        env = child_env(
            root,
            LOCKGUARD_TARGETS_FILE=str(targets),
            LOCKGUARD_SCAN_SCHEDULE="every 1m",
            LOCKGUARD_DIGEST_SCHEDULE="off",
            SLACK_BOT_TOKEN=TOKEN,
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_API_URL=slack.url,
            LOCKGUARD_SLACK_CHANNEL=CHANNEL,
            LOCKGUARD_APPROVERS="*",
            LOCKGUARD_HTTP_HOST="127.0.0.1",
            PORT=str(port),
        )
        out = targets.with_suffix(".out")
        proc = spawn([sys.executable, "-m", "bot", "serve"], root, env, out)

        def scrape() -> None:
            run.scans = scans_per_target(port, fleet, count)

        # a few seconds past the last whole minute ('every 1m' ticks on whole minutes)
        measure(run, proc, 1.0, minutes * 60 + 15, scrape)
        posts = sum(c.method == "chat.postMessage" for c in slack.calls())
    err = out.with_suffix(".err").read_text(errors="replace")
    peak = max((s[3] for s in run.samples), default=0.0)
    run.note = f"{posts} Slack posts; busiest second {100 * peak:.0f}% of a core"
    if "Traceback" in err or run.exit_code != 0:
        print(f"   serve stderr (tail):\n{err[-3000:]}", flush=True)
    print(
        f"   {name}: {run.threads} threads, {run.hwm_kib / 1024:.0f} MB, scans per target "
        f"{[run.scans.get(f't{i:02d}', 0) for i in range(count)]}",
        flush=True,
    )
    return run


def serve_mode(fleet: Fleet, args: argparse.Namespace) -> tuple[list[Run], list[Check]]:
    """serve over the first 10 targets for a minute, then over all K for `args.serve` minutes."""
    k, minutes = len(fleet.servers), args.serve
    small_k = min(10, k)
    small = serve_run(f"serve, first {small_k} targets, 1 min", fleet, small_k, 1, args.bot_root)
    run = serve_run(f"serve, {k} targets, {minutes} min", fleet, k, minutes, args.bot_root)
    counts = [run.scans.get(f"t{i:02d}", 0) for i in range(k)]
    rss = [s[1] for s in run.samples] or [0]
    first, second = rss[: len(rss) // 2] or [0], rss[len(rss) // 2 :]
    checks = [
        (
            f"serve: peak threads {run.threads} with {k} targets ({small.threads} with {small_k}) "
            f"<= {SERVE_THREADS} (every pool's cap + single threads)",
            run.threads <= SERVE_THREADS and small.threads <= SERVE_THREADS,
        ),
        (
            f"serve: peak RSS {run.hwm_kib / 1024:.0f} MB <= {args.rss_bound_mb:.0f} MB",
            run.hwm_kib / 1024 <= args.rss_bound_mb,
        ),
        (
            f"serve: RSS not growing scan after scan: second half at most {max(second) / 1024:.0f} "
            f"MB <= 1.2 x the first half's {max(first) / 1024:.0f} MB",
            max(second) <= 1.2 * max(first),
        ),
        (
            f"serve: no target starved: scans per target {min(counts)}-{max(counts)} (about "
            f"{minutes} each, at least {max(1, minutes - 1)})",
            min(counts) >= max(1, minutes - 1),
        ),
        (
            f"serve: exit {run.exit_code} on SIGTERM (and {small.exit_code})",
            run.exit_code == 0 and small.exit_code == 0,
        ),
    ]
    return [small, run], checks


def scans_per_target(port: int, fleet: Fleet, count: int) -> dict[str, int]:
    """Scheduled scans per target from `/metrics`; else each target's `{lockguard}:digest`
    counts (scans serve ran since the last digest: none is posted here)."""
    text = ""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
    except OSError as exc:
        print(f"   /metrics: {exc}", flush=True)
    out: dict[str, int] = {}
    for m in re.finditer(r"^lockguard_scans_total\{([^}]*)\} ([0-9.e+]+)$", text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if labels.get("trigger") == "schedule" and "target" in labels:
            out[labels["target"]] = out.get(labels["target"], 0) + int(float(m.group(2)))
    if out:
        return out
    for i in range(count):
        with fleet.client(i) as c:
            got = c.hmget(b"{lockguard}:digest", b"scans_ok", b"scans_failed")
        out[f"t{i:02d}"] = sum(int(v) for v in got if v is not None)
    return out


def table(runs: list[Run], serves: list[Run]) -> str:
    lines = [
        "| run | wall (s) | CPU (s) | peak RSS (MB) | peak threads | exit | targets ok / error "
        "| findings | note |",
        "|---|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r.name} | {r.wall:.2f} | {r.cpu:.2f} | {r.hwm_kib / 1024:.0f} | {r.threads} | "
            f"{r.exit_code} | {r.targets_ok} / {r.targets_error} | {r.findings:,} | {r.note} |"
        )
    if serves:
        lines += [
            "",
            "| serve | wall (s) | CPU (s) | mean CPU (% of a core) | max RSS (MB) | max threads "
            "| scheduled scans: total, per target min-max | note |",
            "|---|---:|---:|---:|---:|---:|---|---|",
        ]
    for r in serves:
        counts = sorted(r.scans.values()) or [0]
        rss = max((s[1] for s in r.samples), default=0)
        lines.append(
            f"| {r.name} | {r.wall:.0f} | {r.cpu:.1f} | {100 * r.cpu / max(r.wall, 1e-9):.1f} | "
            f"{rss / 1024:.0f} | {r.threads} | {sum(counts)}, {counts[0]}-{counts[-1]} | "
            f"{r.note} |"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--targets", type=int, default=50, help="redis-servers (K)")
    ap.add_argument("--locks", type=int, default=10_000, help="locks per server (L)")
    ap.add_argument("--others", type=int, help="other keys per server (default L/5)")
    ap.add_argument("--concurrency", default="1,8,16", help="LOCKGUARD_TARGET_CONCURRENCY values")
    ap.add_argument(
        "--cli",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the CLI runs (--no-cli: serve mode only)",
    )
    ap.add_argument(
        "--serve",
        type=float,
        nargs="?",
        const=3.0,
        default=0.0,
        metavar="MINUTES",
        help="also `lockguard serve` for MINUTES (default 3)",
    )
    ap.add_argument("--timeout", type=float, default=5.0, help="LOCKGUARD_REDIS_TIMEOUT_SECONDS")
    ap.add_argument("--faults", type=int, default=5, help="servers frozen, then as many killed")
    ap.add_argument("--rss-bound-mb", type=float, default=200.0)
    ap.add_argument(
        "--per-target-mb",
        type=float,
        default=1.0,
        help="RSS allowed per target beyond the first 10 (CLI, concurrency 8)",
    )
    ap.add_argument("--bot-path", help="run the `bot` package of this checkout (default: this one)")
    args = ap.parse_args(argv)
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    args.others = args.locks // 5 if args.others is None else args.others
    args.bot_root = Path(args.bot_path).resolve() if args.bot_path else ROOT
    args.serve = int(args.serve) if args.serve == int(args.serve) else args.serve
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM and SIGHUP end the bench as Ctrl-C does: through the `finally` that stops every
    # child and every server.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
    print(scan_bench.environment(), flush=True)
    print(f"uptime: {os.popen('uptime').read().strip()}", flush=True)
    fleet = Fleet()
    runs: list[Run] = []
    checks: list[Check] = []
    serves: list[Run] = []
    try:
        started = time.monotonic()
        fleet.fill(args.targets, args.locks, args.others)
        print(
            f"   {args.targets} servers, {args.locks:,} locks + {args.others:,} other keys "
            f"each, filled in {time.monotonic() - started:.1f} s",
            flush=True,
        )
        if args.cli:
            runs, checks = cli_mode(fleet, args)
        if args.serve:
            serves, more = serve_mode(fleet, args)
            checks += more
        if args.cli and args.faults and args.targets > 2 * args.faults:
            runs += faults(fleet, fleet.dir / "targets.yaml", args, checks)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP
        print("interrupted: every lockguard child and redis-server is stopped", file=sys.stderr)
        return 130
    finally:
        for proc in CHILDREN:
            proc.kill()
            proc.wait()
        fleet.stop()
    print()
    print(scan_bench.environment())
    print(f"uptime at the end: {os.popen('uptime').read().strip()}")
    print("command: " + " ".join(["bench/fleet_bench.py", *sys.argv[1:]]))
    print()
    print(table(runs, serves))
    print()
    for text, ok in checks:
        print(f"- {text}: {'PASS' if ok else 'FAIL'}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
