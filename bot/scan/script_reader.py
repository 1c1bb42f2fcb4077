"""A Lua batch script kept in flight on a connection of its own (`bot.scan`'s read-ahead), and
the scan's lease-table writes sent behind it on the same connection."""

from __future__ import annotations

from typing import Any, cast

import redis
from redis.typing import EncodableT

Command = tuple[EncodableT, ...]

_pack_c: Any = None  # hiredis's C packer, which redis-py uses too, but after a check per item
try:
    import hiredis

    _pack_c = hiredis.pack_command
except ImportError:  # pragma: no cover - hiredis is a dependency; else redis-py packs
    pass


def _packed(conn: Any, commands: list[Command]) -> list[bytes]:
    """`commands` as RESP, ready to send. The lease-table writes carry a few hundred items per
    HSET and thousands per scan batch: redis-py's `pack_commands` checks each item in Python
    (one generator step per item, about 7% of a scan's client CPU here) before the same C call.
    The items here are bytes (and ints), which hiredis takes as they are; anything else is
    packed by redis-py."""
    if _pack_c is not None:
        try:
            return [b"".join(map(_pack_c, commands))]
        except TypeError:  # an item hiredis does not take as it is (a bytearray)
            pass
    return list(conn.pack_commands(commands))


class ScriptReader:
    """EVALSHA on a connection of its own, so that one call can be in flight while the caller
    works: `send` queues a call, `receive` reads the oldest reply (at most one is ever in
    flight). A lost connection is retried under the connection's own retry policy, as any
    redis-py command would be (the script only reads, so sending it again is harmless). A
    client built with `single_connection_client=True` shares its one connection with the
    caller's writes, so there each call is sent and read at once (no read-ahead).

    `write` sends commands (the lease-table HSETs) on the same connection without waiting:
    Redis runs them before any call sent after them; their replies are read before the next
    call's (`receive`) or by `flush`, and an error reply raises there. They are kept until
    then: a lost connection sends them again with the call (an HSET of the same records twice
    writes the same table)."""

    def __init__(self, client: redis.Redis, script: redis.commands.core.Script) -> None:
        self.client = client
        self.script = script
        self.conn = None
        self.pending: list[tuple[list[bytes], list[EncodableT]]] = []
        self.unsent = False  # the pending call's send failed: receive() sends it again
        self.clean = True  # nothing half-read on the connection
        self.before: list[Command] = []  # writes whose replies come before the next call's
        self.after: list[Command] = []  # writes sent behind the call in flight
        if getattr(client, "connection", None) is None:
            pool = client.connection_pool
            try:
                self.conn = pool.get_connection()
            except TypeError:  # redis-py < 5.3 wants a command name
                self.conn = pool.get_connection("EVALSHA")  # type: ignore[call-arg,unused-ignore]

    def send(self, keys: list[bytes], args: list[EncodableT]) -> None:
        self.pending.append((keys, list(args)))
        if self.conn is None:
            return
        self.clean = False
        try:
            self._send(keys, args)
        except redis.ConnectionError:  # sent again by receive(); a timeout is not retried
            self.conn.disconnect()
            self.unsent = True

    def write(self, commands: list[Command]) -> bool:
        """Send `commands` now, their replies read later; False (nothing sent) without a
        connection of its own: the caller writes them itself."""
        if self.conn is None:
            return False
        (self.after if self.pending else self.before).extend(commands)
        if not self.unsent:  # else sent again with the call, by receive()
            self.clean = False
            self.conn.send_packed_command(_packed(self.conn, commands), check_health=False)
        return True

    def receive(self) -> list[Any]:
        keys, args = self.pending.pop(0)
        conn = self.conn
        if conn is None:
            return cast("list[Any]", self.script(keys=keys, args=args))

        def attempt() -> list[Any]:
            if self.unsent:  # the writes not known to have run, then the call
                self.before, self.after = self.before + self.after, []
                if self.before:
                    conn.send_packed_command(_packed(conn, self.before), check_health=False)
                self._send(keys, args)
                self.unsent = False
            self._read_writes(self.before)
            self.before = []
            try:
                return cast("list[Any]", conn.read_response())
            except redis.exceptions.NoScriptError:
                # The script cache was flushed (restart, SCRIPT FLUSH): load it, ask again.
                self._read_writes(self.after)  # sent behind the refused call: they ran
                self.after = []
                conn.send_command("SCRIPT", "LOAD", self.script.script)
                conn.read_response()
                self._send(keys, args)
                return cast("list[Any]", conn.read_response())

        self.clean = False
        try:
            reply = conn.retry.call_with_retry(attempt, self._failed)
        except _WriteFailed as failed:
            raise failed.error from None  # the call's reply is still unread: not clean
        except redis.ResponseError:
            self._read_writes(self.after)  # the script failed; its error reply was read
            self.after = []
            self.clean = True
            raise
        self.before, self.after = self.after, []
        self.clean = True
        return reply

    def flush(self) -> None:
        """Read the replies of the writes sent since the last call's (no call is in flight)."""
        conn = self.conn
        if conn is None or self.pending or not self.before:
            return

        def attempt() -> None:
            if self.unsent:
                conn.send_packed_command(_packed(conn, self.before), check_health=False)
                self.unsent = False
            self._read_writes(self.before)

        try:
            conn.retry.call_with_retry(attempt, self._failed)
        except _WriteFailed as failed:
            raise failed.error from None
        self.before = []
        self.clean = True

    def _failed(self, _error: Exception) -> None:
        assert self.conn is not None
        self.conn.disconnect()
        self.unsent = True

    def _read_writes(self, commands: list[Command]) -> None:
        """Read one reply per command; the first error reply raises (`_WriteFailed`) once all
        are read."""
        assert self.conn is not None
        error = None
        for _ in commands:
            try:
                self.conn.read_response()
            except redis.ResponseError as exc:
                error = error or exc
        if error is not None:
            raise _WriteFailed(error)

    def _send(self, keys: list[bytes], args: list[EncodableT]) -> None:
        assert self.conn is not None
        self.conn.send_command("EVALSHA", self.script.sha, len(keys), *keys, *args)

    def close(self) -> None:
        if self.conn is None:
            return
        if self.pending or not self.clean or self.before or self.after:
            self.conn.disconnect()  # a reply nobody will read: the next user starts afresh
            self.pending.clear()
            self.before, self.after = [], []
        self.client.connection_pool.release(self.conn)
        self.conn = None


class _WriteFailed(Exception):
    """A write sent behind a call was refused (its error is `error`): never retried."""

    def __init__(self, error: redis.ResponseError) -> None:
        super().__init__(str(error))
        self.error = error
