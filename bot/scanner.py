"""Read every lock matching the patterns: one SCAN cursor loop, one server-side read per batch.

Per key, in this order (research §13.2): `TYPE` (a `GET` on a hash is WRONGTYPE), `OBJECT
IDLETIME` (before the value is read: reading resets it), `PTTL`, then the value by type (string:
the bytes, cut at `max_value_bytes` with the full length and SHA-1 kept; hash: at most
`max_fields` pairs; other types: not read). The batch also carries the server's `TIME` and each
key's previous lease record, and skips keys this scan already wrote (SCAN may repeat keys, and a
key may match two patterns).

Two ways to read a batch, same results:
- `lua` (default): one read-only script per batch; every fact of a batch comes from one instant.
- `pipeline`: for servers where scripting is disabled (some managed services): two
  non-transactional pipelines per batch (facts, then values).
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import redis

from bot.model import Snapshot
from bot.store import PREFIX

MAX_FIELDS = 32
MAX_VALUE_BYTES = 64 * 1024

READ_BATCH_LUA = """
-- KEYS[1]: lease table of the previous scan (hash), KEYS[2]: lease table this scan writes (hash)
-- KEYS[3..]: lock keys. ARGV[1]: max hash pairs to return, ARGV[2]: max string bytes to return.
-- Reply: {seconds, microseconds} then 6 items per lock key:
--   type ('none' if gone, 'dup' if this scan already saw it), idle seconds (-1 unknown), pttl ms,
--   payload (string: bytes, or {first ARGV[2] bytes, sha1hex} when longer; hash: flat pairs;
--   other types: false), size (string length / hash length), previous lease record or false.
local out = redis.call('TIME')
local maxf = tonumber(ARGV[1])
local maxv = tonumber(ARGV[2])
for i = 3, #KEYS do
  local k = KEYS[i]
  local t = redis.call('TYPE', k)['ok']
  if t ~= 'none' and redis.call('HEXISTS', KEYS[2], k) == 1 then t = 'dup' end
  if t == 'none' or t == 'dup' then
    out[#out+1] = t; out[#out+1] = 0; out[#out+1] = -2; out[#out+1] = false
    out[#out+1] = 0; out[#out+1] = false
  else
    local idle = redis.pcall('OBJECT', 'IDLETIME', k)
    if type(idle) ~= 'number' then idle = -1 end
    out[#out+1] = t
    out[#out+1] = idle
    out[#out+1] = redis.call('PTTL', k)
    if t == 'string' then
      local n = redis.call('STRLEN', k)
      if n > maxv then
        out[#out+1] = {redis.call('GETRANGE', k, 0, maxv - 1),
                       redis.sha1hex(redis.call('GET', k))}
      else
        out[#out+1] = redis.call('GET', k)
      end
      out[#out+1] = n
    elseif t == 'hash' then
      local n = redis.call('HLEN', k)
      if n <= maxf then
        out[#out+1] = redis.call('HGETALL', k)
      else
        out[#out+1] = redis.call('HSCAN', k, 0, 'COUNT', maxf)[2]
      end
      out[#out+1] = n
    else
      out[#out+1] = false
      out[#out+1] = 0
    end
    out[#out+1] = redis.call('HGET', KEYS[1], k)
  end
end
return out
"""


class ReadMode(enum.StrEnum):
    AUTO = "auto"
    LUA = "lua"
    PIPELINE = "pipeline"


@dataclass(slots=True)
class ScanStats:
    scan_calls: int = 0
    keys_returned: int = 0  # by SCAN, before de-duplication
    duplicates: int = 0
    vanished: int = 0
    own_keys_skipped: int = 0


Batch = list[tuple[Snapshot, bytes | None]]


class Scanner:
    """Reads lock snapshots in batches. Build one per scan; `mode` decides how batches are read."""

    def __init__(self, client: redis.Redis, *, count: int = 1000, mode: ReadMode = ReadMode.AUTO,
                 max_fields: int = MAX_FIELDS, max_value_bytes: int = MAX_VALUE_BYTES) -> None:
        self.client = client
        self.count = count
        self.max_fields = max_fields
        self.max_value_bytes = max_value_bytes
        self.stats = ScanStats()
        self.mode = self._choose_mode(mode)
        self._script = client.register_script(READ_BATCH_LUA) if self.mode is ReadMode.LUA else None

    def _choose_mode(self, mode: ReadMode) -> ReadMode:
        if mode is not ReadMode.AUTO:
            return mode
        try:
            self.client.script_load(READ_BATCH_LUA)
        except redis.ResponseError:
            return ReadMode.PIPELINE  # scripting disabled or not permitted here
        return ReadMode.LUA

    def batches(self, patterns: Iterable[bytes], prev_table: bytes, new_table: bytes) -> Iterator[Batch]:
        """Yield one batch per SCAN reply. The caller must write a batch's lease records to
        `new_table` before asking for the next batch: that is how repeats are skipped."""
        for pattern in patterns:
            cursor = 0
            while True:
                cursor, keys = self.client.scan(cursor=cursor, match=pattern, count=self.count)
                self.stats.scan_calls += 1
                self.stats.keys_returned += len(keys)
                unique = [k for k in dict.fromkeys(keys) if not k.startswith(PREFIX)]
                self.stats.own_keys_skipped += sum(1 for k in keys if k.startswith(PREFIX))
                self.stats.duplicates += len(keys) - len(set(keys))
                if unique:
                    yield self._read(unique, prev_table, new_table)
                if cursor == 0:
                    break

    def _read(self, keys: list[bytes], prev_table: bytes, new_table: bytes) -> Batch:
        if self._script is not None:
            reply = self._script(keys=[prev_table, new_table, *keys],
                                 args=[self.max_fields, self.max_value_bytes])
            return self._parse_lua(keys, reply)
        return self._read_pipelined(keys, prev_table, new_table)

    def _parse_lua(self, keys: list[bytes], reply: list) -> Batch:
        now_ms = int(reply[0]) * 1000 + int(reply[1]) // 1000
        out: Batch = []
        pos = 2
        for key in keys:
            t, idle, pttl, payload, size, prev = reply[pos : pos + 6]
            pos += 6
            if t == b"none" or t == b"dup":
                self._count_skip(t)
                continue
            out.append((self._snapshot(key, t.decode(), int(pttl), int(idle), now_ms, payload,
                                       int(size)), prev))
        return out

    def _count_skip(self, t: bytes | str) -> None:
        if t in (b"dup", "dup"):
            self.stats.duplicates += 1
        else:
            self.stats.vanished += 1

    def _snapshot(self, key: bytes, t: str, pttl: int, idle: int, now_ms: int, payload: object,
                  size: int) -> Snapshot:
        if t == "string":
            value_sha1 = None
            if isinstance(payload, list):
                value, value_sha1 = payload[0], payload[1]
            else:
                value = payload
            return Snapshot(key, t, pttl, idle, now_ms, value=value, value_len=size,
                            value_sha1=value_sha1)
        if t == "hash":
            flat = payload if isinstance(payload, list) else []
            pairs = tuple(zip(flat[0::2], flat[1::2], strict=True))[: self.max_fields]
            return Snapshot(key, t, pttl, idle, now_ms, fields=pairs, hash_len=size)
        return Snapshot(key, t, pttl, idle, now_ms)

    def _read_pipelined(self, keys: list[bytes], prev_table: bytes, new_table: bytes) -> Batch:
        with self.client.pipeline(transaction=False) as pipe:
            pipe.time()
            for k in keys:
                pipe.type(k)
                pipe.object("idletime", k)
                pipe.pttl(k)
            pipe.hmget(prev_table, keys)
            pipe.hmget(new_table, keys)
            facts = pipe.execute(raise_on_error=False)
        sec, usec = facts[0]
        now_ms = int(sec) * 1000 + int(usec) // 1000
        prev, seen = facts[-2], facts[-1]
        live: list[tuple[bytes, str, int, int, bytes | None]] = []
        for i, k in enumerate(keys):
            t, idle, pttl = facts[1 + 3 * i : 4 + 3 * i]
            tname = t.decode() if isinstance(t, bytes) else str(t)
            if tname == "none" or seen[i] is not None:
                self._count_skip("none" if tname == "none" else "dup")
                continue
            live.append((k, tname, int(pttl), idle if isinstance(idle, int) else -1, prev[i]))
        with self.client.pipeline(transaction=False) as pipe:
            for k, tname, _, _, _ in live:
                if tname == "string":
                    pipe.strlen(k)
                    pipe.getrange(k, 0, self.max_value_bytes - 1)
                elif tname == "hash":
                    pipe.hlen(k)
                    pipe.hscan(k, 0, count=self.max_fields)
            values = iter(pipe.execute(raise_on_error=False))
        out: Batch = []
        for k, tname, pttl, idle, prev_rec in live:
            if tname == "string":
                size, value = next(values), next(values)
                payload: object = value
                if isinstance(size, int) and size > self.max_value_bytes:
                    full = self.client.get(k) or b""
                    payload = [value, hashlib.sha1(full).hexdigest().encode()]
                out.append((self._snapshot(k, tname, pttl, idle, now_ms, payload,
                                           size if isinstance(size, int) else 0), prev_rec))
            elif tname == "hash":
                size, scanned = next(values), next(values)
                if not size:
                    self.stats.vanished += 1
                    continue
                flat = [x for pair in scanned[1].items() for x in pair] if isinstance(
                    scanned, tuple) else []
                out.append((self._snapshot(k, tname, pttl, idle, now_ms, flat, size), prev_rec))
            else:
                out.append((self._snapshot(k, tname, pttl, idle, now_ms, None, 0), prev_rec))
        return out
