"""A throwaway `redis-server` on a free loopback port: for `lockguard demo` and the tests.

No persistence (`--save ""`, `--appendonly no`, unless the extra arguments say otherwise), its own
temporary directory, and `stop()` (or leaving the `with` block) ends the process and removes the
directory; `crash()` and `restart()` (same port, same directory) are for the fault tests.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from types import TracebackType
from typing import Any

import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def end_process(proc: subprocess.Popen[bytes], directory: str) -> None:
    """End a server started here (SIGTERM, then SIGKILL after 5 s) and remove its directory."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    shutil.rmtree(directory, ignore_errors=True)


class RedisProcess:
    """Start it with `RedisProcess(*extra_args)`; raises FileNotFoundError when no redis-server
    is installed and RuntimeError when it does not answer within `start_timeout` seconds."""

    def __init__(self, *extra: str, start_timeout: float = 10.0, port: int | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("redis-server")
        self.port = port or free_port()
        self.password = (
            extra[extra.index("--requirepass") + 1] if "--requirepass" in extra else None
        )
        self.dir = tempfile.mkdtemp(prefix="lockguard-redis-")
        self.argv = [
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
            *extra,
        ]
        self._spawn(start_timeout)

    def _spawn(self, start_timeout: float) -> None:
        self.proc = subprocess.Popen(
            self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + start_timeout
        probe = self.client(password=self.password)
        try:
            while True:
                try:
                    self.version = str(probe.info("server")["redis_version"])
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline or self.proc.poll() is not None:
                        self.stop()
                        raise RuntimeError("redis-server did not start") from None
                    time.sleep(0.02)
                except redis.BusyLoadingError:  # a restart reading its data back
                    time.sleep(0.02)
        finally:
            probe.close()

    def crash(self) -> None:
        """SIGKILL: no shutdown save; what survives is what its persistence already has."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def restart(self, start_timeout: float = 10.0) -> None:
        """Start it again on the same port and directory (after `crash`, or killing it)."""
        self.crash()
        self._spawn(start_timeout)

    def client(self, **kwargs: Any) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)

    def stop(self) -> None:
        end_process(self.proc, self.dir)

    def __enter__(self) -> RedisProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
