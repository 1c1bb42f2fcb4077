"""Where each case's Slack message is: `{lockguard}:slack:case:<id>` = {channel, ts}.

The scan that opens a case posts its message and saves the coordinates here, so that every
later decision (a click, a modal submitted minutes later, a restart in between) rewrites that
one message with `chat.update`. The key lives as long as a closed case is kept (the retention),
which covers the case's whole life. Redis failures come out as `LockguardError`s, like the
engine's.
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

    def save(self, case_id: str, ref: MessageRef) -> None:
        key = slack_message_key(case_id)
        with self._door.errors(), self._door.client.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"channel": ref.channel, "ts": ref.ts})
            pipe.pexpire(key, self._retention_ms)
            pipe.execute()

    def get(self, case_id: str) -> MessageRef | None:
        with self._door.errors():
            raw = self._door.client.hmget(slack_message_key(case_id), ["channel", "ts"])
        channel, ts = raw
        if not isinstance(channel, bytes) or not isinstance(ts, bytes):
            return None
        return MessageRef(channel.decode("utf-8", "replace"), ts.decode("utf-8", "replace"))
