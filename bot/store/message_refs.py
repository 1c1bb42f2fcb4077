"""Where each case's Slack message is: `{lockguard}:slack:case:<id>` = {channel, ts}.

Every later decision rewrites that one message with `chat.update`; the key lives as long as the
case (the retention). `listed` = 1 once the message and its thread show every lock of the case:
without it the case cannot be approved from Slack. Redis failures come out as `LockguardError`s.
"""

from __future__ import annotations

from typing import NamedTuple

from bot.store.door import Door
from bot.store.keyspace import slack_message_key


class MessageRef(NamedTuple):
    channel: str
    ts: str


class MessageStore:
    def __init__(self, door: Door, retention_ms: int) -> None:
        self._door = door
        self._retention_ms = retention_ms

    def save(self, case_id: str, ref: MessageRef, *, listed: bool) -> None:
        key = slack_message_key(case_id)
        with self._door.errors(), self._door.client.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"channel": ref.channel, "ts": ref.ts, "listed": int(listed)})
            pipe.pexpire(key, self._retention_ms)
            pipe.execute()

    def mark_listed(self, case_id: str) -> None:
        key = slack_message_key(case_id)
        with self._door.errors(), self._door.client.pipeline(transaction=True) as pipe:
            pipe.hset(key, "listed", 1)
            pipe.pexpire(key, self._retention_ms)  # never a key without its lifetime
            pipe.execute()

    def listed(self, case_id: str) -> bool:
        """Whether the case's message and thread show every lock: only when its record says so
        (no record: an Approve click is refused, never taken on trust)."""
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
