"""Small marks the Slack layer keeps in Redis (their keys: `bot.store.keyspace`): the alerts out
and the outage's one message (`AlertMarks`), the findings last posted (`FindingsMark`), each
signed request seen (`SeenRequests`). So any replica, after any restart, posts an alert once,
updates the outage's message, and runs a replayed request never. Redis failures come out as
redis-py's errors (but `SeenRequests`'s): each caller decides what a lost mark means.
"""

from __future__ import annotations

from typing import cast

from bot.store import lease_keys
from bot.store.door import Door
from bot.store.keyspace import ALERTS, POSTED_FINDINGS, SLACK_SEEN_MS, slack_seen_key
from bot.store.message_refs import MessageRef
from bot.store.scans import server_ms

_OUTAGE = b"outage"
_LINE = b"line:"


class AlertMarks:
    def __init__(self, door: Door) -> None:
        self._client = door.client

    def get(self, kind: str) -> str | None:
        """The fingerprint of the alert of `kind` that is out, or None."""
        raw = self._client.hget(ALERTS, kind)
        if not isinstance(raw, bytes):
            return None
        return raw.split(b"|", 1)[0].decode("ascii", "replace")

    def set(self, kind: str, fingerprint: str) -> None:
        self._client.hset(ALERTS, kind, f"{fingerprint}|{server_ms(self._client)}")

    def clear(self, kind: str) -> bool:
        """True when an alert of `kind` was out."""
        return bool(self._client.hdel(ALERTS, kind))

    def outage(self) -> MessageRef | None:
        """Where the outage's message is, while one is out."""
        raw = self._client.hget(ALERTS, _OUTAGE)
        if not isinstance(raw, bytes) or b"|" not in raw:
            return None
        channel, ts = raw.decode("utf-8", "replace").split("|", 1)
        return MessageRef(channel, ts)

    def set_outage(self, ref: MessageRef) -> None:
        self._client.hset(ALERTS, _OUTAGE, f"{ref.channel}|{ref.ts}")

    def take_outage(self) -> bool:
        """Forget the outage's message; True for the one caller that did (it says it is over)."""
        return bool(self._client.hdel(ALERTS, _OUTAGE))

    def set_line(self, kind: str, title: str, detail: str) -> None:
        value = f"{server_ms(self._client)}\n{title}\n{detail}"
        self._client.hset(ALERTS, _LINE + kind.encode(), value.encode())

    def clear_line(self, kind: str) -> None:
        self._client.hdel(ALERTS, _LINE + kind.encode())

    def lines(self) -> list[tuple[str, str, str]]:
        """The outage's problems, oldest first: (kind, title, detail)."""
        found: list[tuple[int, str, str, str]] = []
        for field, value in cast("dict[bytes, bytes]", self._client.hgetall(ALERTS)).items():
            if not field.startswith(_LINE):
                continue
            ms, _, rest = value.decode("utf-8", "replace").partition("\n")
            title, _, detail = rest.partition("\n")
            found.append(
                (int(ms) if ms.isdigit() else 0, field[len(_LINE) :].decode(), title, detail)
            )
        return [(kind, title, detail) for _, kind, title, detail in sorted(found)]


class FindingsMark:
    def __init__(self, door: Door, repeat_after_ms: int) -> None:
        self._client = door.client
        self._repeat_after_ms = repeat_after_ms

    def news(self, fingerprint: bytes) -> bool:
        """Record `fingerprint` as the findings last posted; True when it was not already."""
        before = self._client.set(POSTED_FINDINGS, fingerprint, px=self._repeat_after_ms, get=True)
        return before != fingerprint

    def forget(self, fingerprint: bytes | None) -> None:
        """Forget the findings last posted (only if they are `fingerprint`, when given)."""
        if fingerprint is None:
            self._client.delete(POSTED_FINDINGS)
        else:
            lease_keys.give_back(self._client, POSTED_FINDINGS, fingerprint)  # compare-and-delete


class SeenRequests:
    def __init__(self, door: Door) -> None:
        self._door = door

    def first_time(self, signature: str, timestamp: str) -> bool:
        """True when this signed request was not seen before (it is now)."""
        key = slack_seen_key(signature, timestamp)
        with self._door.errors():
            return bool(self._door.client.set(key, b"1", nx=True, px=SLACK_SEEN_MS))
