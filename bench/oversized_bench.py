"""Oversized keys benchmark (issue 34, item 3): abandoned locks under keys over 4 KiB, scanned,
offered by their sha256 and released (up to `MAX_TRACKED_KEY_BYTES`, 64 KiB) or only counted
and named (longer: the issue's 32 MiB), with the peak memory of lockguard and of Redis.

    .venv/bin/python bench/oversized_bench.py [--kib 32768] [--keys 4]

It starts a redis-server (free loopback port, no persistence), plants the keys (redis-py tokens
minted two hours ago, no TTL: held past the threshold on first sight) beside one small lock, and
runs the real CLI, each command a process of its own so that its peak RSS (VmHWM) is its own:
- `lockguard scan --json` on an empty database first: the command's own baseline;
- `lockguard scan --json` (twice: the first opens the case and reads each key whole once for
  its digest; the second finds them in that live case and reads none whole);
- `lockguard approve CASE --by bench --yes-count N` (each key found again by its sha256 and
  deleted by its exact bytes; the small lock alone when the keys are too long to track).
After each: Redis's `used_memory_peak` and `used_memory` (the bytes it allocated), the answer's
length, and the bytes of lockguard's own keys (`{lockguard}:*`: names and `DUMP` values).
Not part of the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.demo.embedded import RedisProcess  # noqa: E402
from tests.core.test_layouts import uuid1_hex  # noqa: E402
from tests.scan.test_oversized_keys import own_bytes  # noqa: E402

MIB = 1024 * 1024


#: The child: lockguard's CLI, then its own peak RSS (KiB) on stderr: VmHWM, the process's own
#: since its exec (`ru_maxrss` would count the bench's own memory, which a fork copies).
_CHILD = (
    "import atexit, sys\n"
    f"sys.path.insert(0, {str(ROOT / 'bench')!r})\n"
    "import scan_bench\n"
    "atexit.register(lambda: print('MAXRSS', scan_bench.vm_hwm_kib(), file=sys.stderr))\n"
    "from bot.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def run(env: dict[str, str], *argv: str) -> tuple[int, str, float, float]:
    """(exit code, stdout, that command's peak RSS in MB, seconds)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv], env=env, capture_output=True, text=True, check=False
    )
    took = time.perf_counter() - started
    line = [x for x in done.stderr.splitlines() if x.startswith("MAXRSS ")]
    return done.returncode, done.stdout, int(line[-1].split()[1]) / 1024, took


def line(step: str, code: int, took: float, rss: float, peak: str, answer: int) -> None:
    print(f"{step:<28} {code:>4} {took:5.1f}  {rss:10.0f} MB  {peak:>10} MiB  {answer:,} B")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kib", type=int, default=32 * 1024, help="size of each key, KiB")
    parser.add_argument("--keys", type=int, default=4, help="how many oversized keys")
    args = parser.parse_args()
    server = RedisProcess()
    try:
        r = server.client()
        now_ms = int(r.time()[0]) * 1000
        for i in range(args.keys):
            key = b"lock:" + (b"%d" % i) * (args.kib * 1024 - 5)
            r.set(key[: args.kib * 1024], uuid1_hex(now_ms - 7_200_000 - i))
        r.set(b"lock:small", uuid1_hex(now_ms - 7_200_000))
        base = int(r.info("memory")["used_memory"])
        env = {
            **os.environ,
            "REDIS_URL": f"redis://127.0.0.1:{server.port}/0",
            "LOCKGUARD_LOCK_PATTERNS": "lock:*",
            "LOCKGUARD_DRY_RUN": "false",
        }
        print(f"{args.keys} keys of {args.kib} KiB; Redis used_memory {base / MIB:.0f} MiB")
        print("step                         exit  secs   lockguard peak RSS  Redis peak  answer")
        empty = {**env, "REDIS_URL": f"redis://127.0.0.1:{server.port}/1"}
        code, out, rss, took = run(empty, "scan", "--json")
        step = "scan --json (no keys: base)"
        line(step, code, took, rss, "-", len(out))
        case_id = ""
        for step in ("scan --json (opens)", "scan --json (again)"):
            code, out, rss, took = run(env, "scan", "--json")
            case_id = case_id or (json.loads(out).get("case") or {}).get("case_id", "")
            peak = int(r.info("memory")["used_memory_peak"]) // MIB
            line(step, code, took, rss, str(peak), len(out))
        offered = json.loads(run(env, "cases", case_id, "--json")[1].split("\n")[0])
        n = str(offered["case"]["lock_count"])
        code, out, rss, took = run(env, "approve", case_id, "--by", "bench", "--yes-count", n)
        peak = int(r.info("memory")["used_memory_peak"]) // MIB
        line("approve", code, took, rss, str(peak), len(out))
        left = r.dbsize()
        print(f"keys left in Redis: {left} (lockguard's own state: {own_bytes(r):,} bytes)")
        return 0 if code == 0 else 1
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
