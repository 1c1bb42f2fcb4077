"""Read every lock matching the patterns: one SCAN cursor loop, one server-side read per batch.

Per key, in this order (research §13.2): `TYPE` (a `GET` on a hash is WRONGTYPE), `OBJECT
IDLETIME` (before the value is read: reading resets it), `PTTL`, then the value by type (string:
the bytes, cut at `max_value_bytes` with the full length and SHA-1 kept; hash: at most
`max_fields` pairs; other types: not read). The batch also carries the server's `TIME` and each
key's previous lease record, and skips keys this scan already wrote (SCAN may repeat keys, and a
key may match two patterns), keys that vanished since SCAN returned them, and lockguard's own
`lockguard:` keys.

Two ways to read a batch, same results:
- `lua` (default): one read-only script per batch runs the SCAN call(s) itself (calling SCAN
  again while it has fewer than `batch_keys` keys, at most `max_scan_calls` times, so that sparse
  replies make one batch) and returns every fact of every key it found, all from one instant.
  The next batch's script is sent before the current batch is handed to the caller, so Redis
  reads batch i+1 while Python classifies batch i (one connection, replies in order). Repeats
  are still skipped: the script skips keys already in this scan's lease table, which, when the
  script for batch i+1 runs, holds every batch but batch i; the scanner skips batch i's keys
  itself.
- `pipeline`: for servers where scripting is disabled (some managed services): SCAN, then two
  non-transactional pipelines per batch (facts, then values), one batch at a time.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from typing import Any, cast

import redis
from redis.typing import EncodableT

from bot.keyspace import PREFIX
from bot.model import Snapshot
from bot.script_reader import ScriptReader

MAX_FIELDS = 32
MAX_VALUE_BYTES = 64 * 1024
#: A Lua batch SCANs again while it has fewer keys than this. A batch is at least one SCAN
#: reply (about COUNT x the share of matching keys); the script blocks Redis for about 5-10 µs
#: per key it reads, so ~500-key batches block it ~5 ms at a time.
BATCH_KEYS = 250
#: SCAN calls one script may make to fill a batch: on a sparse keyspace each call walks COUNT
#: slots for few keys, and 4 x COUNT 1000 keeps one script under ~3 ms.
MAX_SCAN_CALLS = 4

READ_BATCH_LUA = """
-- One batch of a scan: SCAN (again while fewer than ARGV[4] keys were found, at most ARGV[5]
-- calls), then every fact of every key found, all at one instant. Reads only.
-- KEYS[1]: lease table of the previous scan (hash), KEYS[2]: lease table this scan writes (hash).
-- ARGV: [1] cursor, [2] MATCH pattern, [3] SCAN COUNT, [4] batch size, [5] max SCAN calls,
--       [6] max hash pairs to return, [7] max string bytes to return, [8] own key prefix.
-- Reply: {next cursor, seconds, microseconds, SCAN calls, keys SCAN returned, duplicates skipped,
--         own keys skipped, vanished keys skipped} then 7 items per live lock key:
--   key, type, idle seconds (-1 unknown), pttl ms, payload (string: bytes, or {first ARGV[7]
--   bytes, sha1hex} when longer; hash: flat pairs; other types: false), size (string length /
--   hash length), previous lease record or false.
-- Keys already in KEYS[2] (this scan wrote them), vanished keys and own keys are only counted.
local unpack = unpack or table.unpack
local cursor = ARGV[1]
local want = tonumber(ARGV[4])
local max_calls = tonumber(ARGV[5])
local maxf = tonumber(ARGV[6])
local maxv = tonumber(ARGV[7])
local prefix = ARGV[8]
local plen = #prefix
local keys, seen = {}, {}
local calls, returned, dups, own, vanished = 0, 0, 0, 0, 0
repeat
  local r = redis.call('SCAN', cursor, 'MATCH', ARGV[2], 'COUNT', ARGV[3])
  cursor = r[1]
  calls = calls + 1
  returned = returned + #r[2]
  local own_seen = {}
  for _, k in ipairs(r[2]) do
    if string.sub(k, 1, plen) == prefix then
      own = own + 1
      if own_seen[k] then dups = dups + 1 else own_seen[k] = true end
    elseif seen[k] then
      dups = dups + 1
    else
      seen[k] = true
      keys[#keys + 1] = k
    end
  end
until cursor == '0' or #keys >= want or calls >= max_calls
local now = redis.call('TIME')
local out = {cursor, now[1], now[2], calls, returned, 0, own, 0}
local n = #keys
local prev, done = {}, {}
for i = 1, n, 500 do
  local j = math.min(i + 499, n)
  local p = redis.call('HMGET', KEYS[1], unpack(keys, i, j))
  local d = redis.call('HMGET', KEYS[2], unpack(keys, i, j))
  for x = 1, j - i + 1 do
    prev[i + x - 1] = p[x]
    done[i + x - 1] = d[x]
  end
end
local m = #out
for i = 1, n do
  local k = keys[i]
  local t = redis.call('TYPE', k)['ok']
  if t == 'none' then
    vanished = vanished + 1
  elseif done[i] then
    dups = dups + 1
  else
    local idle = redis.pcall('OBJECT', 'IDLETIME', k)
    if type(idle) ~= 'number' then idle = -1 end
    out[m + 1] = k
    out[m + 2] = t
    out[m + 3] = idle
    out[m + 4] = redis.call('PTTL', k)
    if t == 'string' then
      local v = redis.call('GET', k)
      local len = #v
      if len > maxv then
        -- fakeredis has no redis.sha1hex: then the client hashes the value itself.
        out[m + 5] = {string.sub(v, 1, maxv), redis.sha1hex and redis.sha1hex(v) or false}
      else
        out[m + 5] = v
      end
      out[m + 6] = len
    elseif t == 'hash' then
      local len = redis.call('HLEN', k)
      if len <= maxf then
        out[m + 5] = redis.call('HGETALL', k)
      else
        out[m + 5] = redis.call('HSCAN', k, 0, 'COUNT', maxf)[2]
      end
      out[m + 6] = len
    else
      out[m + 5] = false
      out[m + 6] = 0
    end
    out[m + 7] = prev[i]
    m = m + 7
  end
end
out[6] = dups
out[8] = vanished
return out
"""

_HEAD = 8  # items before the first key in a READ_BATCH_LUA reply
# _parse_lua builds Snapshots with positional arguments: it relies on this field order.
assert Snapshot.__match_args__[:10] == (
    "key", "type", "pttl_ms", "idle_s", "observed_ms", "value", "value_len", "value_sha1",
    "fields", "hash_len"), "bot.model.Snapshot changed: update Scanner._parse_lua"
_TYPE_NAMES = {b"string": "string", b"hash": "hash", b"list": "list", b"set": "set",
               b"zset": "zset", b"stream": "stream"}


_PROBE_TABLE = PREFIX + b"leases:probe"  # never written: the probe finds no key
_PROBE_PATTERN = PREFIX + b"probe"  # one own key at most: nothing the script would read
LUA_MODE_NEEDS = ("the lua read mode needs EVALSHA and every command its script calls (SCAN "
                  "TIME HMGET TYPE OBJECT PTTL GET HLEN HGETALL HSCAN); --read-mode auto falls "
                  "back to pipelined reads")


def _refused(exc: redis.ResponseError) -> bool:
    """Scripting or a command refused here (ACL, disabled, renamed), in or out of a script."""
    text = str(exc)
    return isinstance(exc, redis.exceptions.NoPermissionError) or any(
        s in text for s in ("The user executing the script", "no permissions", "nknown command",
                            "nknown Redis command"))


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
                 max_fields: int = MAX_FIELDS, max_value_bytes: int = MAX_VALUE_BYTES,
                 batch_keys: int = BATCH_KEYS, max_scan_calls: int = MAX_SCAN_CALLS) -> None:
        self.client = client
        self.count = count
        self.max_fields = max_fields
        self.max_value_bytes = max_value_bytes
        self.batch_keys = batch_keys
        self.max_scan_calls = max_scan_calls
        self.stats = ScanStats()
        self._script = client.register_script(READ_BATCH_LUA)
        self._auto = mode is ReadMode.AUTO
        self.mode = self._choose_mode(mode)

    def _choose_mode(self, mode: ReadMode) -> ReadMode:
        """AUTO: lua, unless the probe (one empty batch: EVALSHA, loading the script, and the
        script's own SCAN and TIME, on a pattern nothing matches) is refused."""
        if mode is not ReadMode.AUTO:
            return mode
        try:
            self._script(keys=[_PROBE_TABLE, _PROBE_TABLE],
                         args=[0, _PROBE_PATTERN, 1, 1, 1, 0, 0, PREFIX])
        except redis.ResponseError as exc:
            if not _refused(exc):
                raise
            return ReadMode.PIPELINE  # scripting disabled or not permitted here
        return ReadMode.LUA

    def batches(self, patterns: Iterable[bytes], prev_table: bytes,
                new_table: bytes) -> Generator[Batch, None, None]:
        """Yield the locks batch by batch. The caller must write a batch's lease records to
        `new_table` before asking for the next batch: that is how repeats are skipped."""
        if self.mode is ReadMode.LUA:
            return self._lua_or_pipeline(list(patterns), prev_table, new_table)
        return self._pipeline_batches(patterns, prev_table, new_table)

    def _lua_or_pipeline(self, patterns: list[bytes], prev_table: bytes,
                         new_table: bytes) -> Generator[Batch, None, None]:
        """Lua batches. A first batch refused (an ACL that passed the probe but refuses a
        command the script calls on a lock) falls back to pipelined reads in AUTO mode, before
        anything was yielded; an explicit lua mode says what it needs instead."""
        lua = self._lua_batches(patterns, prev_table, new_table)
        try:
            try:
                first = next(lua)
            except StopIteration:
                return
            except redis.ResponseError as exc:
                if not _refused(exc):
                    raise
                if not self._auto:
                    exc.lockguard_hint = LUA_MODE_NEEDS  # type: ignore[attr-defined]
                    raise
                self.mode, self.stats = ReadMode.PIPELINE, ScanStats()
                yield from self._pipeline_batches(patterns, prev_table, new_table)
                return
            yield first
            yield from lua
        finally:
            lua.close()

    # -- lua ---------------------------------------------------------------------------------

    def _lua_batches(self, patterns: Iterable[bytes], prev_table: bytes,
                     new_table: bytes) -> Generator[Batch, None, None]:
        reader = ScriptReader(self.client, self._script)
        try:
            in_hand: set[bytes] = set()  # keys of the batch the caller is working on
            for pattern in patterns:
                args: list[EncodableT] = [
                    b"0", pattern, self.count, self.batch_keys, self.max_scan_calls,
                    self.max_fields, self.max_value_bytes, PREFIX]
                keys = [prev_table, new_table]
                reader.send(keys, args)
                while True:
                    reply = reader.receive()
                    cursor = reply[0]
                    done = cursor == b"0" or cursor == 0
                    if not done:
                        args[0] = cursor
                        reader.send(keys, args)  # Redis reads the next batch meanwhile
                    batch = self._parse_lua(reply, in_hand)
                    in_hand = {snap.key for snap, _ in batch}
                    if batch:
                        yield batch
                    if done:
                        break
        finally:
            reader.close()

    def _parse_lua(self, reply: list[Any], in_hand: set[bytes]) -> Batch:
        stats = self.stats
        stats.scan_calls += int(reply[3])
        stats.keys_returned += int(reply[4])
        stats.duplicates += int(reply[5])
        stats.own_keys_skipped += int(reply[6])
        stats.vanished += int(reply[7])
        now_ms = int(reply[1]) * 1000 + int(reply[2]) // 1000
        max_fields = self.max_fields
        out: Batch = []
        append = out.append
        it = iter(reply)
        for _ in range(_HEAD):
            next(it)
        for key, t, idle, pttl, payload, size, prev in zip(it, it, it, it, it, it, it,
                                                           strict=True):
            if key in in_hand:
                stats.duplicates += 1  # in the batch before: not yet written when this was read
                continue
            # Positional arguments in Snapshot's field order (key, type, pttl_ms, idle_s,
            # observed_ms, value, value_len, value_sha1, fields, hash_len): once per lock.
            if t == b"string":
                if payload.__class__ is list:  # longer than max_value_bytes: {prefix, sha1}
                    sha1 = payload[1] or self._sha1_of(key)
                    snap = Snapshot(key, "string", pttl, idle, now_ms, payload[0], size, sha1)
                else:
                    snap = Snapshot(key, "string", pttl, idle, now_ms, payload, size)
            elif t == b"hash":
                flat = payload if isinstance(payload, list) else []
                pairs = tuple(zip(flat[0::2], flat[1::2], strict=True))[:max_fields]
                snap = Snapshot(key, "hash", pttl, idle, now_ms, None, 0, None, pairs, size)
            else:
                name = _TYPE_NAMES.get(t) or t.decode()
                snap = Snapshot(key, name, pttl, idle, now_ms)
            append((snap, prev))
        return out

    def _sha1_of(self, key: bytes) -> bytes:
        """SHA-1 hex of a value too long to carry, where the server's Lua lacks sha1hex."""
        value = self.client.get(key)
        return hashlib.sha1(value if isinstance(value, bytes) else b"").hexdigest().encode()

    # -- pipeline ----------------------------------------------------------------------------

    def _pipeline_batches(self, patterns: Iterable[bytes], prev_table: bytes,
                          new_table: bytes) -> Generator[Batch, None, None]:
        for pattern in patterns:
            cursor = 0
            while True:
                cursor, found = self.client.scan(cursor=cursor, match=pattern, count=self.count)
                keys = cast("list[bytes]", found)  # bytes: the client never decodes
                self.stats.scan_calls += 1
                self.stats.keys_returned += len(keys)
                unique = [k for k in dict.fromkeys(keys) if not k.startswith(PREFIX)]
                self.stats.own_keys_skipped += sum(1 for k in keys if k.startswith(PREFIX))
                self.stats.duplicates += len(keys) - len(set(keys))
                if unique:
                    yield self._read_pipelined(unique, prev_table, new_table)
                if cursor == 0:
                    break

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
        # A refused TYPE, PTTL, TIME or HMGET is the scan's error; OBJECT IDLETIME may fail.
        _raise_first(x for i, x in enumerate(facts) if i == 0 or i > 3 * len(keys) or i % 3 != 2)
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
            replies = pipe.execute(raise_on_error=False)
        _raise_first(x for x in replies  # WRONGTYPE: a key that changed type in between
                     if isinstance(x, redis.ResponseError) and not str(x).startswith("WRONGTYPE"))
        values = iter(replies)
        out: Batch = []
        for k, tname, pttl, idle, prev_rec in live:
            if tname == "string":
                size, value = next(values), next(values)
                payload: object = value
                if isinstance(size, int) and size > self.max_value_bytes:
                    payload = [value, self._sha1_of(k)]
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


def _raise_first(results: Iterable[object]) -> None:
    for x in results:
        if isinstance(x, redis.ResponseError):
            raise x
