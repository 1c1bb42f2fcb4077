"""Lua scripts' calls kept in flight on a connection of their own (`bot.scan`'s read-ahead), and
the scan's tenure-table writes sent between them on the same connection."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, cast

import redis
from redis.commands.core import Script
from redis.typing import EncodableT

Command = tuple[EncodableT, ...]

_pack_c: Any = None  # hiredis's C packer, which redis-py uses too, but after a check per item
try:
    import hiredis

    _pack_c = hiredis.pack_command
except ImportError:  # pragma: no cover - hiredis is a dependency; else redis-py packs
    pass


def _packed(conn: Any, commands: list[Command]) -> list[bytes]:
    """`commands` as RESP. hiredis packs bytes, str and ints as they are; redis-py's
    `pack_commands` checks each item in Python first (a scan's items number in the millions)."""
    if _pack_c is not None:
        try:
            return [b"".join(map(_pack_c, commands))]
        except TypeError:  # an item hiredis does not take as it is (a bytearray)
            pass
    return list(conn.pack_commands(commands))


#: A script's NOSCRIPT answered again right after it was loaded: something flushes the cache
#: as fast as it is filled; give up instead of trying for ever.
_RELOADS = 3


@dataclass(slots=True)
class _Item:
    """One thing sent whose replies are not read yet: a script's call, or writes."""

    call: tuple[Script, list[bytes], list[EncodableT]] | None = None
    writes: list[Command] | None = None


class ScriptReader:
    """EVALSHA calls on a connection of their own, several in flight: `send` queues a call,
    `receive` reads the oldest call's reply; `write` sends commands between the calls, their
    replies read on the way to the next call's or by `flush` (an error reply raises there).

    Everything sent is kept until its reply is read: a lost connection or a flushed script cache
    sends all of it again, in order. Harmless: the calls only read, and the writes rewrite the
    same records. A `single_connection_client` has no read-ahead and `write` sends nothing."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.conn = None
        self.unread: deque[_Item] = deque()  # sent, replies not read yet, in the order sent
        self.unsent = False  # the connection was lost: everything unread is sent again
        if getattr(client, "connection", None) is None:
            pool = client.connection_pool
            try:
                self.conn = pool.get_connection()
            except TypeError:  # redis-py < 5.3 wants a command name
                self.conn = pool.get_connection("EVALSHA")  # type: ignore[call-arg,unused-ignore]

    def send(self, script: Script, keys: list[bytes], args: list[EncodableT]) -> None:
        item = _Item(call=(script, keys, list(args)))
        self.unread.append(item)
        if self.conn is not None and not self.unsent:
            try:
                self._send(item)
            except redis.ConnectionError:  # sent again by receive(); a timeout is not retried
                self._failed(None)

    def write(self, commands: list[Command]) -> bool:
        """Send `commands` now, replies read later; False (nothing sent) without a connection of
        its own: the caller writes them itself."""
        if self.conn is None:
            return False
        item = _Item(writes=list(commands))
        self.unread.append(item)
        if not self.unsent:  # else sent again with the rest, by receive()
            try:
                self._send(item)
            except redis.ConnectionError:
                self._failed(None)
        return True

    @property
    def in_flight(self) -> int:
        return sum(1 for item in self.unread if item.call is not None)

    def receive(self) -> list[Any]:
        """The oldest call's reply (the writes' sent before it read first; the first error among
        them raises). After a script's error reply `close` drops the connection."""
        conn = self.conn
        if conn is None:
            script, keys, args = cast(
                "tuple[Script, list[bytes], list[EncodableT]]", self.unread.popleft().call
            )
            return cast("list[Any]", script(keys=keys, args=args))
        try:
            return conn.retry.call_with_retry(self._next_reply, self._failed)
        except _WriteFailed as failed:
            raise failed.error from None

    def flush(self) -> None:
        """Read the replies of the writes sent since the last call's (no call is in flight)."""
        conn = self.conn
        if conn is None or self.in_flight or not self.unread:
            return

        def attempt() -> None:
            self._resend()
            while self.unread:
                self._read_writes()

        try:
            conn.retry.call_with_retry(attempt, self._failed)
        except _WriteFailed as failed:
            raise failed.error from None

    def close(self) -> None:
        if self.conn is None:
            return
        if self.unread:
            self.conn.disconnect()  # replies nobody will read: the next user starts afresh
            self.unread.clear()
        self.client.connection_pool.release(self.conn)
        self.conn = None

    # -- the connection ----------------------------------------------------------------------

    def _next_reply(self) -> list[Any]:
        assert self.conn is not None
        for _ in range(_RELOADS):
            self._resend()
            while self.unread[0].writes is not None:
                self._read_writes()
            try:
                reply = self.conn.read_response()
            except redis.exceptions.NoScriptError:
                # The script cache was flushed (restart, SCRIPT FLUSH): what is behind this
                # call may have been refused too; drop it all, load the scripts, send again.
                self._failed(None)
                scripts = {i.call[0].sha: i.call[0] for i in self.unread if i.call}
                for script in scripts.values():
                    self.conn.send_command("SCRIPT", "LOAD", script.script)
                    self.conn.read_response()
                continue
            except redis.ResponseError:
                self.unread.popleft()  # the script failed; its error reply was read
                raise
            self.unread.popleft()
            return cast("list[Any]", reply)
        raise redis.exceptions.NoScriptError("lockguard: the script cache keeps being flushed")

    def _read_writes(self) -> None:
        """Read the first item's replies, one per write; the first error reply raises once all
        are read (a lost connection leaves the item to be sent again)."""
        assert self.conn is not None
        error = None
        for _ in self.unread[0].writes or ():
            try:
                self.conn.read_response()
            except redis.ResponseError as exc:
                error = error or exc
        self.unread.popleft()
        if error is not None:
            raise _WriteFailed(error)

    def _resend(self) -> None:
        """After a lost connection: everything unread, sent again in order."""
        if self.unsent:
            self.unsent = False
            for item in self.unread:
                self._send(item)

    def _failed(self, _error: Exception | None) -> None:
        assert self.conn is not None
        self.conn.disconnect()
        self.unsent = True

    def _send(self, item: _Item) -> None:
        assert self.conn is not None
        if item.call is not None:
            script, keys, args = item.call
            commands: list[Command] = [("EVALSHA", script.sha, len(keys), *keys, *args)]
        else:
            commands = item.writes or []
        self.conn.send_packed_command(_packed(self.conn, commands), check_health=False)


class _WriteFailed(Exception):
    """A write sent behind a call was refused: never retried."""

    def __init__(self, error: redis.ResponseError) -> None:
        super().__init__(str(error))
        self.error = error
