"""A throwaway Redis Cluster on free loopback ports: for the tests and the cluster benchmark.

`EmbeddedCluster(primaries=3, replicas=0)` starts `primaries x (1 + replicas)` redis-server
processes with `--cluster-enabled yes` (no persistence, each in its own temporary directory, as
`bot.demo.embedded`), joins them with `redis-cli --cluster create ... --cluster-yes` and waits until
every node reports `cluster_state:ok`. `stop()` (or leaving the `with` block) ends them all.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from types import TracebackType
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from bot.demo.embedded import RedisProcess


class EmbeddedCluster:
    """Raises FileNotFoundError without redis-server or redis-cli, RuntimeError when the cluster
    does not form within `start_timeout` seconds."""

    def __init__(
        self,
        primaries: int = 3,
        replicas: int = 0,
        *,
        node_timeout_ms: int = 1000,
        start_timeout: float = 30.0,
        extra: tuple[str, ...] = (),
    ) -> None:
        cli = shutil.which("redis-cli")
        if cli is None:
            raise FileNotFoundError("redis-cli")
        self.nodes: list[RedisProcess] = []
        try:
            argv = _node_argv(node_timeout_ms, extra)
            for _ in range(primaries * (1 + replicas)):
                self.nodes.append(_node(argv))
            _create(cli, [f"127.0.0.1:{n.port}" for n in self.nodes], replicas, start_timeout)
            self.wait_ok(start_timeout)
        except BaseException:
            self.stop()
            raise

    @property
    def port(self) -> int:
        """A node to start from (what REDIS_URL names)."""
        return next(n.port for n in self.nodes if n.proc.poll() is None)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Until every live node says `cluster_state:ok` and agrees on all 16384 slots."""
        deadline = time.monotonic() + timeout
        while True:
            if all(_node_ok(n) for n in self.nodes if n.proc.poll() is None):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.05)

    def client(self, **kwargs: Any) -> RedisCluster:
        return RedisCluster(host="127.0.0.1", port=self.port, **kwargs)

    def primaries(self) -> list[RedisProcess]:
        """The live nodes that are primaries now (a failover changes which)."""
        out = []
        for n in self.nodes:
            if n.proc.poll() is not None:
                continue
            try:
                with n.client() as c:
                    if c.info("replication").get("role") == "master":
                        out.append(n)
            except redis.RedisError:
                continue
        return out

    def add_empty_primary(self) -> RedisProcess:
        """A new primary joined with CLUSTER MEET and given no slots (as when scaling out,
        before the resharding)."""
        node = RedisProcess(
            *self.nodes[0].argv[self.nodes[0].argv.index("--cluster-enabled") :],
            port=_cluster_port(),
        )
        self.nodes.append(node)
        with node.client() as c:
            c.execute_command("CLUSTER", "MEET", "127.0.0.1", self.nodes[0].port)
        deadline = time.monotonic() + 30
        while node not in self.primaries() or not all(
            len(_known(n)) == len(self.nodes) for n in self.primaries()
        ):
            if time.monotonic() > deadline:
                raise RuntimeError("the new primary did not join the cluster")
            time.sleep(0.05)
        self.wait_ok()  # it knows the slot map too
        return node

    def owner(self, key: bytes) -> RedisProcess:
        """The primary that serves `key`'s slot now."""
        slot = key_slot(key)
        return next(n for n in self.primaries() if slot in _owned(n))

    def move_slot(self, slot: int, to: RedisProcess) -> None:
        """Reshard one slot to the primary `to`, keys and all (CLUSTER SETSLOT + MIGRATE)."""
        src = next(n for n in self.primaries() if n is not to and slot in _owned(n))
        with src.client() as a, to.client() as b:
            src_id, dst_id = (
                a.execute_command("CLUSTER", "MYID"),
                b.execute_command("CLUSTER", "MYID"),
            )
            b.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
            a.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
            while keys := a.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
                a.execute_command("MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS", *keys)
            for n in self.primaries():
                with n.client() as c:
                    c.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        self.wait_ok()

    def failover(self, primary: RedisProcess, timeout: float = 30.0) -> RedisProcess:
        """A replica of `primary` takes over (CLUSTER FAILOVER: no write is lost); returns it."""
        with primary.client() as c:
            my_id = c.execute_command("CLUSTER", "MYID")
        for n in self.nodes:
            with n.client() as c:
                info = c.info("replication")
                if info.get("role") == "slave" and int(info.get("master_port", 0)) == primary.port:
                    _take_over(c, timeout)
                    self.wait_ok(timeout)
                    return n
        raise LookupError(f"primary {primary.port} ({my_id!r}) has no replica")

    def sync_replicas(self, timeout_ms: int = 5000) -> None:
        """Until every write so far reached each primary's replica (WAIT)."""
        for n in self.primaries():
            with n.client() as c:
                if c.info("replication").get("connected_slaves", 0):
                    c.execute_command("WAIT", 1, timeout_ms)

    def node(self, port: int) -> RedisProcess:
        return next(n for n in self.nodes if n.port == port)

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()

    def __enter__(self) -> EmbeddedCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _node_argv(node_timeout_ms: int, extra: tuple[str, ...]) -> tuple[str, ...]:
    """The redis-server arguments of every node of the cluster."""
    return (
        "--cluster-enabled",
        "yes",
        "--cluster-node-timeout",
        str(node_timeout_ms),
        "--cluster-config-file",
        "nodes.conf",
        # a replica takes over however long it was cut off from its primary
        "--cluster-replica-validity-factor",
        "0",
        "--repl-diskless-sync-delay",
        "0",
        *extra,
    )


def _create(cli: str, addresses: list[str], replicas: int, timeout: float) -> None:
    """`redis-cli --cluster create`: the nodes at `addresses` joined, slots assigned."""
    argv = [cli, "--cluster", "create", *addresses, "--cluster-replicas", str(replicas)]
    subprocess.run(
        [*argv, "--cluster-yes"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=timeout,
    )


def _node_ok(node: RedisProcess) -> bool:
    """`cluster_state:ok`, all 16384 slots served, and (a replica) linked to its primary."""
    try:
        with node.client() as c:
            info = c.cluster("info")
        if info.get("cluster_state") != "ok" or int(info.get("cluster_slots_ok", 0)) != 16384:
            return False
        with node.client() as c:
            repl = c.info("replication")
    except redis.RedisError:
        return False
    return bool(repl.get("role") == "master" or repl.get("master_link_status") == "up")


def _take_over(replica: redis.Redis, timeout: float) -> None:
    """CLUSTER FAILOVER on `replica`, until it reports itself a primary."""
    replica.execute_command("CLUSTER", "FAILOVER")
    deadline = time.monotonic() + timeout
    while replica.info("replication").get("role") != "master":
        if time.monotonic() > deadline:
            raise RuntimeError("the failover did not finish")
        time.sleep(0.05)


def _known(node: RedisProcess) -> list[bytes]:
    """The nodes `node` knows of and is connected to (CLUSTER NODES)."""
    with node.client() as c:
        text = c.execute_command("CLUSTER", "NODES")
    lines = text.decode() if isinstance(text, bytes) else str(text)
    return [ln.encode() for ln in lines.splitlines() if " connected" in ln]


def _owned(node: RedisProcess) -> set[int]:
    with node.client() as c:
        my_id = c.execute_command("CLUSTER", "MYID")
        out: set[int] = set()
        for start, end, primary, *_ in c.execute_command("CLUSTER", "SLOTS"):
            if primary[2] == my_id:
                out.update(range(start, end + 1))
    return out


def _node(argv: tuple[str, ...], attempts: int = 3) -> RedisProcess:
    """A cluster node on a free port; again on another when its port was taken meanwhile."""
    for attempt in range(attempts):
        try:
            return RedisProcess(*argv, port=_cluster_port())
        except RuntimeError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _cluster_port() -> int:
    """A free port whose cluster bus port (+10000) is free too, both below Linux's ephemeral
    range (32768 and up), where an outgoing connection could take them meanwhile."""
    while True:
        port = random.randint(10_000, 22_000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10_000))
        except OSError:
            continue
        return port
