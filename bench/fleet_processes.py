"""The processes of bench/fleet_bench.py: the fleet's redis-servers (`Fleet`) and a lockguard
child measured from outside (`measure`: wall, CPU from `wait4`, VmHWM and threads sampled from
/proc; `Run` holds what was measured). Not part of the tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import scan_bench  # bench/ is on sys.path: fleet_bench.py puts it there


@dataclass
class Run:
    """One measured child process."""

    name: str
    wall: float = 0.0
    cpu: float = 0.0
    hwm_kib: int = 0
    threads: int = 0
    exit_code: int = 0
    targets_ok: int = 0
    targets_error: int = 0
    findings: int = 0
    note: str = ""
    errors: dict[str, str] = field(default_factory=dict)
    scans: dict[str, int] = field(default_factory=dict)
    samples: list[tuple[float, int, int, float]] = field(default_factory=list)


class Fleet:
    """K filled redis-servers and the targets file naming them."""

    def __init__(self) -> None:
        self.servers: list[scan_bench.Server] = []
        self.dir = Path(tempfile.mkdtemp(prefix="lockguard-fleet-bench-"))
        self.passwords: dict[int, str] = {}

    def fill(self, k: int, locks: int, others: int) -> None:
        for i in range(k):
            server = scan_bench.Server()
            self.servers.append(server)
            scan_bench.populate(server, locks, others, seed=i)
            if i % 10 == 0:  # a few targets with a password, given through a password_file
                self.passwords[i] = f"fleet-pw-{i}-{os.urandom(4).hex()}"
                (self.dir / f"t{i:02d}.pw").write_text(self.passwords[i] + "\n")
                server.cli("CONFIG", "SET", "requirepass", self.passwords[i])
            if (i + 1) % 10 == 0 or i + 1 == k:
                print(f"   {i + 1}/{k} servers filled", flush=True)

    def targets_file(self, name: str, count: int | None = None, schedule: str = "") -> Path:
        lines = ["targets:"]
        for i, server in enumerate(self.servers[:count]):
            lines += [f"  - name: t{i:02d}", f"    url: redis://127.0.0.1:{server.port}/0"]
            if i in self.passwords:
                lines.append(f"    password_file: t{i:02d}.pw")
            lines.append(f"    labels: {{team: {'ab'[i % 2]}}}")
            if schedule:
                lines.append(f'    schedule: "{schedule}"')
        path = self.dir / name
        path.write_text("\n".join(lines) + "\n")
        return path

    def client(self, i: int) -> Any:
        import redis

        return redis.Redis(port=self.servers[i].port, password=self.passwords.get(i))

    def stop(self) -> None:
        for server in self.servers:
            if server.proc.poll() is None:
                os.kill(server.proc.pid, signal.SIGCONT)  # a frozen one must see SIGTERM
            server.stop()
        for f in self.dir.iterdir():
            f.unlink()
        self.dir.rmdir()


def proc_status(pid: int) -> tuple[int, int, int]:
    """(Threads, VmHWM KiB, VmRSS KiB) of a live process; zeros once it is gone."""
    values = {"Threads": 0, "VmHWM": 0, "VmRSS": 0}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in values:
                    values[name] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return values["Threads"], values["VmHWM"], values["VmRSS"]


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a live process has used so far."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_env(bot_root: Path, **extra: str) -> dict[str, str]:
    """The bench's environment without any REDIS_*, LOCKGUARD_*, SLACK_* or proxy setting, then
    `extra`: what the child sees is exactly what the bench sets."""
    drop = ("REDIS_", "LOCKGUARD_", "SLACK_", "HTTP_PROXY", "HTTPS_PROXY", "PORT")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(drop)}
    env["PYTHONPATH"] = str(bot_root)
    env.update(LOCKGUARD_LOCK_PATTERNS="lock:*", LOCKGUARD_STALE_THRESHOLD_SECONDS="900")
    env.update(extra)
    return env


def spawn(
    argv: list[str], bot_root: Path, env: dict[str, str], out: Path
) -> subprocess.Popen[bytes]:
    with open(out, "wb") as stdout, open(out.with_suffix(".err"), "wb") as stderr:
        return subprocess.Popen(argv, cwd=bot_root, env=env, stdout=stdout, stderr=stderr)


CHILDREN: list[subprocess.Popen[bytes]] = []


def measure(
    run: Run,
    proc: subprocess.Popen[bytes],
    every: float,
    until: float | None = None,
    before_stop: Callable[[], None] | None = None,
) -> None:
    """Sample `proc` every `every` s until it exits (with `until`: until then, then
    `before_stop()` and SIGTERM); fill `run` with its wall time, CPU (`wait4`: user + system),
    peak VmHWM and thread count, exit code, and (time, RSS, threads, CPU share) samples."""
    CHILDREN.append(proc)
    started = t0 = time.monotonic()
    cpu0 = 0.0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        now = time.monotonic()
        if pid:
            break
        threads, hwm, rss = proc_status(proc.pid)
        run.threads, run.hwm_kib = max(run.threads, threads), max(run.hwm_kib, hwm)
        if until is not None:
            cpu = proc_cpu(proc.pid)
            if now > t0 and rss:
                run.samples.append((now - started, rss, threads, (cpu - cpu0) / (now - t0)))
            cpu0, t0 = cpu, now
            if now - started >= until:
                if before_stop is not None:
                    before_stop()
                proc.send_signal(signal.SIGTERM)
                until = None
        time.sleep(every)
    proc.returncode = os.waitstatus_to_exitcode(status)
    CHILDREN.remove(proc)
    run.wall, run.exit_code = now - started, proc.returncode
    run.cpu = usage.ru_utime + usage.ru_stime
