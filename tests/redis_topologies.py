"""Redis that is more than one server, started by the tests on free loopback ports: a TLS server
(with a throwaway CA made by the `openssl` CLI), a primary + replica watched by Sentinel, and a
3-node Redis Cluster. Each is a context manager that stops its processes and removes its files.

A missing `redis-server` / `redis-cli` / `openssl` skips the test locally but fails it under
CI=true, as `tests/conftest.py:start_or_skip` does.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

import redis

from bot.demo.embedded import RedisProcess, end_process, free_port
from tests.conftest import missing

HOST = "127.0.0.1"


def not_installed(binary: str) -> NoReturn:
    missing(f"{binary} is not installed")


def need(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        not_installed(binary)
    return path


def start(*extra: str) -> RedisProcess:
    try:
        return RedisProcess(*extra)
    except FileNotFoundError:
        not_installed("redis-server")


def wait_for(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class _Stack:
    """Stop everything started, last first, even when a later start fails."""

    def __init__(self) -> None:
        self._stops: list[Callable[[], None]] = []

    def push(self, stop: Callable[[], None]) -> None:
        self._stops.append(stop)

    def stop(self) -> None:
        while self._stops:
            with contextlib.suppress(Exception):  # clean up the rest regardless
                self._stops.pop()()

    def __enter__(self) -> _Stack:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# -- TLS --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # the CA that signed the server's and the client's certificates
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here: verifying against it must fail
    wrong_name_cert: Path  # signed by `ca`, but for elsewhere.invalid: the host name check fails
    wrong_name_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run([need("openssl"), *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def make_tls_files(directory: Path) -> TlsFiles:
    """A throwaway CA, a server certificate for localhost / 127.0.0.1 and a client certificate
    (EC keys, valid for two days), and an unrelated CA."""
    d = directory
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    for name in ("ca", "other-ca"):
        _openssl(
            "req",
            "-x509",
            *ec,
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.crt",
            "-days",
            "2",
            "-subj",
            f"/CN=lockguard test {name}",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            cwd=d,
        )
    for name, usage, alt in (
        ("server", "serverAuth", "DNS:localhost,IP:127.0.0.1"),
        ("client", "clientAuth", "DNS:lockguard"),
        ("wrong-name", "serverAuth", "DNS:elsewhere.invalid"),
    ):
        (d / f"{name}.ext").write_text(
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
            f"extendedKeyUsage={usage}\nsubjectAltName={alt}\n"
            "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n"
        )
        _openssl(
            "req",
            "-new",
            *ec,
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN=lockguard test {name}",
            cwd=d,
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.crt",
            "-days",
            "2",
            "-extfile",
            f"{name}.ext",
            cwd=d,
        )
    return TlsFiles(
        ca=d / "ca.crt",
        server_cert=d / "server.crt",
        server_key=d / "server.key",
        client_cert=d / "client.crt",
        client_key=d / "client.key",
        other_ca=d / "other-ca.crt",
        wrong_name_cert=d / "wrong-name.crt",
        wrong_name_key=d / "wrong-name.key",
    )


def tls_args(files: TlsFiles, port: int) -> list[str]:
    """redis-server (or Sentinel) options: TLS on `port` with the server certificate, TLS for
    its own outgoing links (replication; Sentinel's links to the servers), no client
    certificates required (the server certificate is not one)."""
    return [
        "--tls-port",
        str(port),
        "--tls-cert-file",
        str(files.server_cert),
        "--tls-key-file",
        str(files.server_key),
        "--tls-ca-cert-file",
        str(files.ca),
        "--tls-replication",
        "yes",
        "--tls-auth-clients",
        "no",
    ]


class TlsRedis:
    """redis-server with TLS on `tls_port`. Its plain port (`plain`, a RedisProcess) stays open
    on loopback for the tests' own set-up and inspection; lockguard is only given the TLS port.
    `auth_clients`: `no`, `optional` or `yes` (a client certificate is required); `cert`: the
    server's (certificate, key), `files.server_cert` by default."""

    def __init__(
        self,
        files: TlsFiles,
        *,
        auth_clients: str = "no",
        password: str | None = None,
        cert: tuple[Path, Path] | None = None,
    ) -> None:
        self.tls_port = free_port()
        cert_file, key_file = cert or (files.server_cert, files.server_key)
        extra = [
            "--tls-port",
            str(self.tls_port),
            "--tls-cert-file",
            str(cert_file),
            "--tls-key-file",
            str(key_file),
            "--tls-ca-cert-file",
            str(files.ca),
            "--tls-auth-clients",
            auth_clients,
        ]
        if password is not None:
            extra += ["--requirepass", password]
        self.plain = start(*extra)
        self.password = password

    def client(self, **kwargs: Any) -> redis.Redis:
        """A plain-text client on the plain port (set-up only)."""
        return self.plain.client(password=self.password, **kwargs)

    def stop(self) -> None:
        self.plain.stop()

    def __enter__(self) -> TlsRedis:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# -- Sentinel ---------------------------------------------------------------------------------


class SentinelProcess:
    """`redis-server <conf> --sentinel` on a free loopback port, monitoring `name` at
    127.0.0.1:`primary_port` with quorum 1 and short timings."""

    def __init__(
        self,
        name: str,
        primary_port: int,
        *,
        password: str | None = None,
        tls: TlsFiles | None = None,
        down_after_ms: int = 500,
        failover_timeout_ms: int = 2000,
    ) -> None:
        binary = need("redis-server")
        self.port = free_port()  # plain text, for the tests' own client
        self.tls_port = free_port() if tls is not None else None
        self.dir = tempfile.mkdtemp(prefix="lockguard-sentinel-")
        conf = Path(self.dir) / "sentinel.conf"  # Sentinel rewrites it: it must be writable
        lines = [
            f"port {self.port}",
            f"bind {HOST}",
            f"dir {self.dir}",
            f"sentinel monitor {name} {HOST} {primary_port} 1",
            f"sentinel down-after-milliseconds {name} {down_after_ms}",
            f"sentinel failover-timeout {name} {failover_timeout_ms}",
            f"sentinel parallel-syncs {name} 1",
        ]
        if password is not None:
            lines.append(f"sentinel auth-pass {name} {password}")
        if tls is not None and self.tls_port is not None:
            args = tls_args(tls, self.tls_port)
            lines += [f"{k.lstrip('-')} {v}" for k, v in zip(args[::2], args[1::2], strict=True)]
        conf.write_text("\n".join(lines) + "\n")
        self.proc = subprocess.Popen(
            [binary, str(conf), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.client = redis.Redis(
            host=HOST, port=self.port, socket_timeout=2, decode_responses=True
        )
        try:
            wait_for(self._up, "sentinel to start")
        except BaseException:
            self.stop()
            raise

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError("redis-server --sentinel did not start")
        return bool(self.client.ping())

    def stop(self) -> None:
        self.client.close()
        end_process(self.proc, self.dir)


class SentinelSet:
    """A primary, one replica, and `sentinels` sentinels watching them as `name`. With `tls`,
    the servers and the sentinels also listen with TLS and replicate and watch over it: the
    ports the sentinels announce (and `addresses`) are the TLS ones; each process keeps its
    plain port on loopback for the tests' own set-up (`node`)."""

    def __init__(
        self,
        name: str = "lgprimary",
        *,
        sentinels: int = 1,
        password: str | None = None,
        tls: TlsFiles | None = None,
    ) -> None:
        self.name = name
        self.password = password
        self.tls = tls
        # No diskless-sync delay (5 s by default): the replica is in sync at once.
        auth = ["--repl-diskless-sync-delay", "0"]
        if password:
            auth += ["--requirepass", password, "--masterauth", password]
        self._stack = _Stack()
        self._plain: dict[int, int] = {}  # announced (TLS) port -> plain port
        try:
            primary, announced = self._start(auth)
            replica, _ = self._start(["--replicaof", HOST, str(announced), *auth])
            self.nodes = {self._announced(n): n for n in (primary, replica)}
            wait_for(
                lambda: (
                    self.node(self._announced(replica))
                    .info("replication")
                    .get("master_link_status")
                    == "up"
                ),
                "the replica to sync",
            )
            self.sentinels = []
            for _ in range(sentinels):
                s = SentinelProcess(name, announced, password=password, tls=tls)
                self._stack.push(s.stop)
                self.sentinels.append(s)
            wait_for(self._replica_known, "the sentinels to see the replica")
        except BaseException:
            self._stack.stop()
            raise

    def _start(self, extra: list[str]) -> tuple[RedisProcess, int]:
        tls_port = free_port() if self.tls is not None else None
        node = start(*extra, *(tls_args(self.tls, tls_port) if self.tls and tls_port else []))
        self._stack.push(node.stop)
        if tls_port is not None:
            self._plain[tls_port] = node.port
        return node, tls_port or node.port

    def _announced(self, node: RedisProcess) -> int:
        return next((t for t, p in self._plain.items() if p == node.port), node.port)

    @property
    def addresses(self) -> str:
        """REDIS_SENTINELS for these sentinels (their TLS ports with `tls`)."""
        return ",".join(f"{HOST}:{s.tls_port or s.port}" for s in self.sentinels)

    def node(self, port: int) -> redis.Redis:
        """A plain client on the server the sentinels know as 127.0.0.1:`port`."""
        return redis.Redis(
            host=HOST, port=self._plain.get(port, port), password=self.password, socket_timeout=2
        )

    def primary_port(self) -> int:
        return int(self.sentinels[0].client.sentinel_masters()[self.name]["port"])

    def primary(self) -> redis.Redis:
        """A plain client on today's primary (set-up and inspection)."""
        return self.node(self.primary_port())

    def _replica_known(self) -> bool:
        return all(
            any(
                r.get("flags") == "slave" and r.get("master-link-status") == "ok"
                for r in s.client.sentinel_slaves(self.name)
            )
            for s in self.sentinels
        )

    def replicate(self) -> None:
        """Wait until the replica has every write the primary took (`WAIT 1`)."""
        primary = self.primary()
        try:
            wait_for(
                lambda: int(primary.execute_command("WAIT", 1, 1000)) >= 1,
                "the replica to acknowledge the writes",
            )
        finally:
            primary.close()

    def failover(self, timeout: float = 10.0) -> int:
        """A planned failover, `SENTINEL FAILOVER`: the replica becomes the primary. Returns its
        port once the sentinels name it and the old primary has been demoted to its replica.
        Sentinel demotes the old primary itself, but only some 10 seconds later (its INFO
        period); the tests do it at once with REPLICAOF, as Sentinel would, so that nothing is
        written to the old primary in between (Sentinel's split-brain window, not lockguard's)."""
        old = self.primary_port()
        self.replicate()
        deadline = time.monotonic() + timeout

        def started() -> bool:
            try:
                return bool(
                    self.sentinels[0].client.execute_command("SENTINEL", "FAILOVER", self.name)
                )
            except redis.ResponseError as exc:  # NOGOODSLAVE / INPROG: not yet
                if time.monotonic() > deadline:
                    raise AssertionError(f"SENTINEL FAILOVER: {exc}") from None
                return False

        wait_for(started, "SENTINEL FAILOVER to start", timeout)
        new = self._new_primary(old, timeout)
        demoted = self.node(old)
        try:
            demoted.replicaof(HOST, new)
            wait_for(
                lambda: demoted.info("replication").get("master_link_status") == "up",
                "the old primary to follow the new one",
                timeout,
            )
        finally:
            demoted.close()
        return new

    def kill_primary(self, timeout: float = 15.0) -> int:
        """An unplanned failover: the primary's process dies; the sentinels see it down
        (down-after-milliseconds) and promote the replica. Returns the new primary's port."""
        old = self.primary_port()
        self.replicate()
        self.nodes[old].stop()
        return self._new_primary(old, timeout)

    def wait_new_primary(self, old: int, timeout: float = 15.0) -> int:
        """After the primary on `old` died some other way: until the sentinels promoted the
        replica. Returns the new primary's port."""
        return self._new_primary(old, timeout)

    def _new_primary(self, old: int, timeout: float) -> int:
        # SENTINEL MASTERS, what redis-py asks: it names the new primary only once the failover
        # is complete (GET-MASTER-ADDR-BY-NAME does a little earlier).
        wait_for(
            lambda: all(
                int(s.client.sentinel_masters()[self.name]["port"]) != old for s in self.sentinels
            ),
            "the sentinels to name the new primary",
            timeout,
        )
        new = self.primary_port()
        node = self.node(new)
        try:
            wait_for(
                lambda: node.info("replication")["role"] == "master",
                "the new primary to take writes",
                timeout,
            )
        finally:
            node.close()
        return new

    def stop(self) -> None:
        self._stack.stop()

    def __enter__(self) -> SentinelSet:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# -- Cluster ----------------------------------------------------------------------------------


def _cluster_ok(node: RedisProcess, nodes: int) -> bool:
    client = node.client(decode_responses=True)
    try:
        info = client.cluster("info")
        return bool(info["cluster_state"] == "ok" and int(info["cluster_known_nodes"]) == nodes)
    finally:
        client.close()


class ClusterSet:
    """A 3-primary Redis Cluster (no replicas) on loopback, created with `redis-cli --cluster
    create`; ready once every node says cluster_state:ok."""

    def __init__(self, nodes: int = 3) -> None:
        cli = need("redis-cli")
        self._stack = _Stack()
        try:
            self.nodes: list[RedisProcess] = []
            for _ in range(nodes):
                # the bus port given: by default it is the port + 10000, past 65535 for some
                node = start(
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                    "--cluster-port",
                    str(free_port()),
                )
                self._stack.push(node.stop)
                self.nodes.append(node)
            subprocess.run(
                [
                    cli,
                    "--cluster",
                    "create",
                    *(f"{HOST}:{n.port}" for n in self.nodes),
                    "--cluster-yes",
                ],
                check=True,
                capture_output=True,
                timeout=30,
            )
            for n in self.nodes:
                wait_for(partial(_cluster_ok, n, nodes), "cluster_state:ok")
        except BaseException:
            self._stack.stop()
            raise

    @property
    def ports(self) -> list[int]:
        return [n.port for n in self.nodes]

    def stop(self) -> None:
        self._stack.stop()

    def __enter__(self) -> ClusterSet:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
