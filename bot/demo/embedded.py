"""A throwaway `redis-server` on a free loopback port, without persistence unless the extra
arguments ask for it, in a temporary directory `stop()` removes; `crash()` and `restart()` (same
port and directory) are for the fault tests."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from types import TracebackType
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry


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


class _PortTaken(Exception):
    """Our redis-server exited at start: another process holds its port."""


class RedisProcess:
    """Start it with `RedisProcess(*extra_args)`; raises FileNotFoundError when no redis-server
    is installed and RuntimeError when it does not answer within `start_timeout` seconds."""

    def __init__(self, *extra: str, start_timeout: float = 10.0, port: int | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("redis-server")
        self._fixed_port = port is not None
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

    def _spawn(self, start_timeout: float, attempts: int = 3) -> None:
        """Start redis-server and wait until it answers; its free port taken meanwhile makes it
        exit at once: tried again on a new port, unless the port was given. Leaves no process."""
        for attempt in range(attempts):
            self.proc = subprocess.Popen(
                self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            try:
                self._wait_ready(start_timeout)
                return
            except _PortTaken:
                self.crash()  # its directory stays, for the next try
                if self._fixed_port or attempt == attempts - 1:
                    self.stop()
                    raise RuntimeError(
                        f"redis-server exited at start on port {self.port} (the port taken, or "
                        "its arguments refused)"
                    ) from None
                self.port = free_port()
                self.argv[self.argv.index("--port") + 1] = str(self.port)
            except BaseException:
                self.stop()
                raise

    def _wait_ready(self, start_timeout: float) -> None:
        deadline = time.monotonic() + start_timeout
        # a timeout: what answers on the port may be another process that never replies
        probe = self.client(
            password=self.password,
            socket_timeout=2,
            socket_connect_timeout=2,
            retry=Retry(NoBackoff(), 0),  # this loop is the retry
        )
        try:
            while True:
                try:
                    self.version = str(probe.info("server")["redis_version"])
                    if self.proc.poll() is not None:  # someone else answered on our port
                        raise _PortTaken
                    return
                except redis.BusyLoadingError:  # a restart reading its data back
                    time.sleep(0.02)
                except (
                    redis.ConnectionError,
                    redis.TimeoutError,
                    redis.InvalidResponse,
                    AttributeError,
                ):
                    # not up yet; or another process's answer, which redis-py may not parse
                    if self.proc.poll() is not None:
                        raise _PortTaken from None
                    if time.monotonic() > deadline:
                        raise RuntimeError("redis-server did not start") from None
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
        self._spawn(start_timeout, attempts=1)  # the same port: its clients point at it

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
