"""Real BullMQ from pytest: installs the pinned packages of tests/node (npm ci, once, under a file
lock so xdist workers do not race) and drives tests/node/bullmq_worker.mjs as subprocesses
pointed at a redis-server the tests started.

Without node or npm, or when the install fails, the tests skip with the reason; under CI=true
they fail instead (the policy tests/conftest.py has for a missing redis-server). The install is
cached in tests/node/node_modules (gitignored), keyed by the hash of package-lock.json.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NoReturn

from tests.conftest import missing

NODE_DIR = Path(__file__).resolve().parent
SCRIPT = NODE_DIR / "bullmq_worker.mjs"
#: The installed BullMQ packages (tests/node/package.json): 6.x as `bullmq`, 5.x as `bullmq5`.
PACKAGES = {"bullmq": "6.7.0", "bullmq5": "5.81.5"}
INSTALL_TIMEOUT_S = 300
START_TIMEOUT_S = 20
#: ioredis 6 (package.json) needs node 20 or later.
NODE_MAJOR = 20


def unavailable(reason: str) -> NoReturn:
    missing(reason)


def ensure_installed() -> str:
    """The path of `node`, once tests/node/node_modules holds exactly package-lock.json's
    packages (running `npm ci` first when it does not)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        unavailable("node and npm are not installed (the real-BullMQ tests run BullMQ in node)")
    version = subprocess.run(
        [node, "--version"], capture_output=True, text=True, timeout=30, check=False
    ).stdout.strip()
    major = version.lstrip("v").split(".")[0]
    if not major.isdigit() or int(major) < NODE_MAJOR:
        unavailable(
            f"node {version or '(no version)'} is older than {NODE_MAJOR}, which tests/node needs"
        )
    digest = hashlib.sha256((NODE_DIR / "package-lock.json").read_bytes()).hexdigest()[:16]
    stamp = NODE_DIR / "node_modules" / f".lockguard-installed-{digest}"
    if stamp.exists():
        return node
    with open(NODE_DIR / ".install.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # one installer; the others wait, then find the stamp
        if not stamp.exists():
            _npm_ci(npm)
            stamp.touch()
    return node


def _npm_ci(npm: str) -> None:
    argv = [npm, "ci", "--prefix", str(NODE_DIR), "--ignore-scripts", "--no-audit", "--no-fund"]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        unavailable(f"`npm ci` in tests/node took over {INSTALL_TIMEOUT_S}s")
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()[-5:]
        unavailable(f"`npm ci` in tests/node failed ({done.returncode}): {' / '.join(said)}")


@dataclass(frozen=True)
class Jobs:
    """`count` jobs with BullMQ's own job options `opts` (`priority`, `delay`,
    `deduplication: {"id": ..., "ttl": ...}`, ...)."""

    count: int
    opts: dict[str, Any] = field(default_factory=dict)


def jobs(count: int, **opts: Any) -> Jobs:
    return Jobs(count, opts)


class Worker:
    """One running `bullmq_worker.mjs work` (or `listen`): the job it holds and its lock token
    ("" for a listener), its pid."""

    def __init__(self, proc: subprocess.Popen[str], log: IO[str], said: dict[str, Any]) -> None:
        self.proc = proc
        self.log = log
        self.job: str = said.get("job", "")
        self.token: str = said.get("token", "")
        self.pid: int = proc.pid

    def kill(self) -> None:
        """SIGKILL: the worker dies without a word to Redis (its lock stays until it lapses)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def freeze(self) -> None:
        """SIGSTOP: it stays connected but writes nothing (no renewal) until `thaw`."""
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()


class BullMQ:
    """BullMQ (`package`, a key of PACKAGES) against the redis-server on 127.0.0.1:`port` (with
    `cluster`: the Redis Cluster that node is in)."""

    def __init__(self, node: str, package: str, port: int, *, cluster: bool = False) -> None:
        self.node, self.package, self.port, self.cluster = node, package, port, cluster
        self.workers: list[Worker] = []

    def _argv(self, command: str, queue: str, prefix: str, *extra: str) -> list[str]:
        base = [self.node, str(SCRIPT), command, "--port", str(self.port), "--queue", queue]
        return [*base, "--prefix", prefix, *(["--cluster"] if self.cluster else []), *extra]

    def _env(self) -> dict[str, str]:
        return {**os.environ, "BULLMQ_PACKAGE": self.package}

    def _once(self, command: str, queue: str, prefix: str, *extra: str) -> dict[str, Any]:
        """Run a command that exits when done; its last JSON line."""
        done = subprocess.run(
            self._argv(command, queue, prefix, *extra),
            capture_output=True,
            text=True,
            env=self._env(),
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, f"bullmq_worker.mjs {command}: {done.stderr}"
        said: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
        return said

    def add(self, queue: str, *groups: Jobs, prefix: str = "bull") -> list[str]:
        """Add each group's jobs with BullMQ's own `Queue.add`, in one node process: their ids."""
        spec = json.dumps([[g.count, g.opts] for g in groups])
        ids: list[str] = self._once("add", queue, prefix, "--jobs", spec)["ids"]
        return ids

    def pause(self, queue: str, *, prefix: str = "bull") -> None:
        """Pause the queue with BullMQ's own `Queue.pause`."""
        self._once("pause", queue, prefix)

    def schedule(self, queue: str, scheduler: str, *, prefix: str = "bull") -> str:
        """Upsert a job scheduler (every hour, first job due now): that job's id."""
        job: str = self._once("schedule", queue, prefix, "--scheduler", scheduler)["id"]
        return job

    def work(
        self,
        queue: str,
        *,
        prefix: str = "bull",
        name: str | None = None,
        lock_duration_ms: int = 30_000,
        lock_renew_ms: int | None = None,
        rate_limit: bool = False,
        stalled_interval_ms: int | None = None,
    ) -> Worker:
        """Start a Worker whose processor never returns (with `rate_limit`, a limiter; its
        stalled check every `stalled_interval_ms`, BullMQ's 30 s by default); back once it holds
        a job."""
        extra = ["--lock-duration", str(lock_duration_ms)]
        if rate_limit:
            extra.append("--rate-limit")
        if stalled_interval_ms is not None:
            extra += ["--stalled-interval", str(stalled_interval_ms)]
        if name is not None:
            extra += ["--name", name]
        if lock_renew_ms is not None:
            extra += ["--lock-renew", str(lock_renew_ms)]
        return self._start("work", queue, prefix, extra, until="active")

    def listen(self, queue: str, *, prefix: str = "bull") -> Worker:
        """Start a QueueEvents listener (its connection `<prefix>:<base64 queue>:qe`)."""
        return self._start("listen", queue, prefix, [], until="listening")

    def _start(self, command: str, queue: str, prefix: str, extra: list[str], until: str) -> Worker:
        log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (Worker.stop closes it)
        proc = subprocess.Popen(
            self._argv(command, queue, prefix, *extra),
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=self._env(),
        )
        try:
            said = _first_line(proc, log, until)
        except BaseException:
            Worker(proc, log, {}).stop()
            raise
        worker = Worker(proc, log, said)
        self.workers.append(worker)
        return worker

    def running(self) -> list[Worker]:
        """The workers started here that are still running (not killed)."""
        return [w for w in self.workers if w.proc.poll() is None]

    def close(self) -> None:
        for w in self.workers:
            w.stop()


def _first_line(proc: subprocess.Popen[str], log: IO[str], event: str) -> dict[str, Any]:
    """The process's {"event": `event`, ...} line, within START_TIMEOUT_S."""
    assert proc.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:  # it exited
            break
        said: dict[str, Any] = json.loads(line)
        if said.get("event") == event:
            return said
    log.seek(0)
    raise AssertionError(f"no {event!r} from bullmq_worker.mjs (exit {proc.poll()}): {log.read()}")
