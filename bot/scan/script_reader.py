"""A Lua batch script kept in flight on a connection of its own (`bot.scan`'s read-ahead)."""

from __future__ import annotations

from typing import Any, cast

import redis
from redis.typing import EncodableT


class ScriptReader:
    """EVALSHA on a connection of its own, so that one call can be in flight while the caller
    works: `send` queues a call, `receive` reads the oldest reply (at most one is ever in
    flight). A lost connection is retried under the connection's own retry policy, as any
    redis-py command would be (the script only reads, so sending it again is harmless). A
    client built with `single_connection_client=True` shares its one connection with the
    caller's writes, so there each call is sent and read at once (no read-ahead)."""

    def __init__(self, client: redis.Redis, script: redis.commands.core.Script) -> None:
        self.client = client
        self.script = script
        self.conn = None
        self.pending: list[tuple[list[bytes], list[EncodableT]]] = []
        self.unsent = False  # the pending call's send failed: receive() sends it again
        self.clean = True  # nothing half-read on the connection
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

    def receive(self) -> list[Any]:
        keys, args = self.pending.pop(0)
        conn = self.conn
        if conn is None:
            return cast("list[Any]", self.script(keys=keys, args=args))

        def attempt() -> list[Any]:
            if self.unsent:
                self._send(keys, args)
                self.unsent = False
            try:
                return cast("list[Any]", conn.read_response())
            except redis.exceptions.NoScriptError:
                # The script cache was flushed (restart, SCRIPT FLUSH): load it, ask again.
                conn.send_command("SCRIPT", "LOAD", self.script.script)
                conn.read_response()
                self._send(keys, args)
                return cast("list[Any]", conn.read_response())

        def failed(_error: Exception) -> None:
            conn.disconnect()
            self.unsent = True

        self.clean = False
        try:
            reply = conn.retry.call_with_retry(attempt, failed)
        except redis.ResponseError:
            self.clean = True  # the script failed; its error reply was read
            raise
        self.clean = True
        return reply

    def _send(self, keys: list[bytes], args: list[EncodableT]) -> None:
        assert self.conn is not None
        self.conn.send_command("EVALSHA", self.script.sha, len(keys), *keys, *args)

    def close(self) -> None:
        if self.conn is None:
            return
        if self.pending or not self.clean:
            self.conn.disconnect()  # a reply nobody will read: the next user starts afresh
            self.pending.clear()
        self.client.connection_pool.release(self.conn)
        self.conn = None
