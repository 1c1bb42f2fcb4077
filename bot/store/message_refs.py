"""Where each case's Slack message is: `{lockguard}:slack:case:<id>` = {channel, ts}.

The scan that opens a case posts its message and saves the coordinates here, so that every
later decision (a click, a modal submitted minutes later, a restart in between) rewrites that
one message with `chat.update`. The key lives as long as a closed case is kept (the retention),
which covers the case's whole life. `listed` says whether every lock of the case is shown by
the message and its thread: `0` while the thread is being posted, or when Slack did not take all
of it (then the case cannot be approved from Slack); a record without it (an older version's)
counts as listed. Redis failures come out as `LockguardError`s, like the engine's.
"""

from __future__ import annotations

from typing import NamedTuple

from bot.store.door import Door
from bot.store.keyspace import slack_message_key


class MessageRef(NamedTuple):
    """A Slack message's coordinates: its channel id and its `ts`."""

    channel: str
    ts: str


class MessageStore:
    def __init__(self, door: Door, retention_ms: int) -> None:
        self._door = door
        self._retention_ms = retention_ms

    def save(self, case_id: str, ref: MessageRef, *, listed: bool) -> None:
        """Where the case's message is; `listed`: it and its thread show every lock."""
        key = slack_message_key(case_id)
        with self._door.errors(), self._door.client.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"channel": ref.channel, "ts": ref.ts, "listed": int(listed)})
            pipe.pexpire(key, self._retention_ms)
            pipe.execute()

    def mark_listed(self, case_id: str) -> None:
        """The case's thread is complete: every lock of the case is shown."""
        key = slack_message_key(case_id)
        with self._door.errors(), self._door.client.pipeline(transaction=True) as pipe:
            pipe.hset(key, "listed", 1)
            pipe.pexpire(key, self._retention_ms)  # never a key without its lifetime
            pipe.execute()

    def listed(self, case_id: str) -> bool:
        """Does the case's message (with its thread) show every lock of the case? Only when its
        record says so: no record (the message went out but where it is was never saved, or not
        yet) is not listed, so an Approve click on it is refused, never taken on trust."""
        with self._door.errors():
            raw = self._door.client.hget(slack_message_key(case_id), "listed")
        return raw == b"1"

    def get(self, case_id: str) -> MessageRef | None:
        with self._door.errors():
            raw = self._door.client.hmget(slack_message_key(case_id), ["channel", "ts"])
        channel, ts = raw
        if not isinstance(channel, bytes) or not isinstance(ts, bytes):
            return None
        return MessageRef(channel.decode("utf-8", "replace"), ts.decode("utf-8", "replace"))
