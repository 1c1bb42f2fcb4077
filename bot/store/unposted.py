"""The cases whose Slack message is still to be posted: `{lockguard}:slack:unposted`.

When Slack does not take a case's message, the case stays pending and its id goes here with its
channel; `bot.slack.reposter` works through it, on any replica, across restarts. A replica
`claim`s an entry (a lease of `LEASE_MS`, in a script) before posting, so no case is posted twice
and a replica that dies mid-post leaves it to be taken again. `done` and `failed` act only for
the claim that holds the entry. Redis failures come out as `LockguardError`s.
"""

from __future__ import annotations

from typing import NamedTuple

import redis
from redis.commands.core import Script

from bot.store.door import Door
from bot.store.keyspace import SLACK_UNPOSTED
from bot.store.scans import server_ms

#: How long a claim holds an entry: longer than a post with all its retries takes.
LEASE_MS = 120_000

# KEYS[1] the unposted hash. ARGV: case id, now ms, claimed-until ms, claim token.
# Returns the entry as it was, or false when it is gone or another claim still holds it.
_CLAIM_LUA = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return false end
local channel, queued, attempts, till = string.match(raw, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|')
if not channel then return false end
if (tonumber(till) or 0) > tonumber(ARGV[2]) then return false end
redis.call('HSET', KEYS[1], ARGV[1],
           channel .. '|' .. queued .. '|' .. attempts .. '|' .. ARGV[3] .. '|' .. ARGV[4])
return raw
"""

# KEYS[1] the unposted hash. ARGV: case id, claim token, "done" | "failed".
# Returns 1 when the claim held the entry (and it was dropped or given back), else 0.
_FINISH_LUA = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local channel, queued, attempts, till, claim =
  string.match(raw, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
if claim ~= ARGV[2] then return 0 end
if ARGV[3] == 'done' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1],
             channel .. '|' .. queued .. '|' .. ((tonumber(attempts) or 0) + 1) .. '|0|')
end
return 1
"""


class Unposted(NamedTuple):
    case_id: str
    channel: str
    queued_ms: int
    attempts: int = 0


def parse_entry(case_id: str, raw: bytes) -> Unposted | None:
    """An entry of the hash; None when it is not one (then it is dropped)."""
    parts = raw.decode("utf-8", "replace").split("|", 4)
    if len(parts) != 5 or not parts[0]:
        return None
    try:
        return Unposted(case_id, parts[0], int(parts[1]), int(parts[2]))
    except ValueError:
        return None


class UnpostedQueue:
    def __init__(self, door: Door) -> None:
        self._door = door
        self._claim: Script | None = None
        self._finish: Script | None = None

    @property
    def _client(self) -> redis.Redis:
        return self._door.client

    def add(self, case_id: str, channel: str) -> None:
        if not channel or "|" in channel:
            raise ValueError(f"not a Slack channel id: {channel[:40]!r}")
        with self._door.errors():
            now = server_ms(self._client)
            self._client.hset(SLACK_UNPOSTED, case_id, f"{channel}|{now}|0|0|")

    def entries(self) -> list[Unposted]:
        """Every entry, oldest first (malformed ones are dropped)."""
        with self._door.errors():
            raw = self._client.hgetall(SLACK_UNPOSTED)
            out: list[Unposted] = []
            for name, value in raw.items():
                case_id = name.decode("utf-8", "replace") if isinstance(name, bytes) else name
                entry = parse_entry(case_id, value if isinstance(value, bytes) else b"")
                if entry is None:
                    self._client.hdel(SLACK_UNPOSTED, name)
                else:
                    out.append(entry)
        return sorted(out, key=lambda e: (e.queued_ms, e.case_id))

    def __len__(self) -> int:
        with self._door.errors():
            return int(self._client.hlen(SLACK_UNPOSTED))

    def claim(self, case_id: str, token: str, *, lease_ms: int = LEASE_MS) -> Unposted | None:
        """The entry, taken for `token` until the lease passes; None when gone or taken."""
        with self._door.errors():
            if self._claim is None:
                self._claim = self._client.register_script(_CLAIM_LUA)
            now = server_ms(self._client)
            raw = self._claim(keys=[SLACK_UNPOSTED], args=[case_id, now, now + lease_ms, token])
        return parse_entry(case_id, raw) if isinstance(raw, bytes) else None

    def done(self, case_id: str, token: str) -> bool:
        """Drop the entry (posted, or nothing left to post) if `token` still holds it."""
        return self._end(case_id, token, "done")

    def failed(self, case_id: str, token: str) -> bool:
        """Give the entry back for a later attempt, one more attempt counted."""
        return self._end(case_id, token, "failed")

    def _end(self, case_id: str, token: str, how: str) -> bool:
        with self._door.errors():
            if self._finish is None:
                self._finish = self._client.register_script(_FINISH_LUA)
            return bool(self._finish(keys=[SLACK_UNPOSTED], args=[case_id, token, how]))
