"""The Lua batch read: SCAN and every fact of every key found, from one server instant."""

from __future__ import annotations

from bot import slots

#: A Lua batch SCANs again while it has fewer keys than this. A batch is at least one SCAN
#: reply (about COUNT x the share of matching keys); the script blocks Redis for about 5-10 µs
#: per key it reads, so ~500-key batches block it ~5 ms at a time.
BATCH_KEYS = 250
#: SCAN calls one script may make to fill a batch: on a sparse keyspace each call walks COUNT
#: slots for few keys, and 4 x COUNT 1000 keeps one script under ~3 ms.
MAX_SCAN_CALLS = 4

#: Lua: `read_key(out, m, key, done, previous record, max pairs, max bytes)` appends one live
#: key's 7 reply items after `out[m]` and returns the new `m`; a vanished key returns `m, 'none'`
#: and one this scan already wrote (`done`) `m, 'dup'`, both only to be counted.
READ_KEY_FN = """
local function read_key(out, m, k, done, prev, maxf, maxv)
  local t = redis.call('TYPE', k)['ok']
  if t == 'none' then return m, 'none' end
  if done then return m, 'dup' end
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
      out[m + 5] = {string.sub(v, 1, maxv)}  -- cut: no lock token is this long
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
  out[m + 7] = prev
  return m + 7, nil
end
"""

_READ_BATCH_HEAD = """
-- One batch of a scan: SCAN (again while fewer than ARGV[4] keys were found, at most ARGV[5]
-- calls), then every fact of every key found, all at one instant. Reads only.
-- KEYS[1]: lease table of the previous scan (hash), KEYS[2]: lease table this scan writes (hash).
-- ARGV: [1] cursor, [2] MATCH pattern, [3] SCAN COUNT, [4] batch size, [5] max SCAN calls,
--       [6] max hash pairs to return, [7] max string bytes to return, [8] own key prefix,
--       [9] the own prefix of the old keyspace format, [10] the prefix of per-slot own keys
--       (`bot.keyspace.OWN_PREFIXES`).
-- Reply: {next cursor, seconds, microseconds, SCAN calls, keys SCAN returned, duplicates skipped,
--         own keys skipped, vanished keys skipped} then 7 items per live lock key:
--   key, type, idle seconds (-1 unknown), pttl ms, payload (string: bytes, or {first ARGV[7]
--   bytes} when longer; hash: flat pairs; other types: false), size (string length /
--   hash length), previous lease record or false.
-- Keys already in KEYS[2] (this scan wrote them), vanished keys and own keys are only counted.
"""

#: Lua: the SCAN loop a batch starts with (ARGV[1..5] and [8..10] as READ_BATCH_LUA's); leaves
#: `keys` (new, unique, not lockguard's own), `n`, `out` (the reply's head) and the counters.
_SCAN_PART = """
local unpack = unpack or table.unpack
local cursor = ARGV[1]
local want = tonumber(ARGV[4])
local max_calls = tonumber(ARGV[5])
local maxf = tonumber(ARGV[6])
local maxv = tonumber(ARGV[7])
local prefix, legacy, per_slot = ARGV[8], ARGV[9], ARGV[10]
local plen, llen, slen = #prefix, #legacy, #per_slot
local keys, seen = {}, {}
local calls, returned, dups, own, vanished = 0, 0, 0, 0, 0
repeat
  local r = redis.call('SCAN', cursor, 'MATCH', ARGV[2], 'COUNT', ARGV[3])
  cursor = r[1]
  calls = calls + 1
  returned = returned + #r[2]
  local own_seen = {}
  for _, k in ipairs(r[2]) do
    if string.sub(k, 1, plen) == prefix or string.sub(k, 1, llen) == legacy
        or string.sub(k, 1, slen) == per_slot then
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
"""

#: Lua: every fact of the `keys`, given `prev` and `done` per key; then the reply.
_READ_PART = """
local m, skip = #out, nil
for i = 1, n do
  m, skip = read_key(out, m, keys[i], done[i], prev[i], maxf, maxv)
  if skip == 'none' then vanished = vanished + 1 elseif skip then dups = dups + 1 end
end
out[6] = dups
out[8] = vanished
return out
"""

READ_BATCH_LUA = READ_KEY_FN + _READ_BATCH_HEAD + _SCAN_PART + """
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
""" + _READ_PART


HEAD = 8  # items before the first key in a READ_BATCH_LUA reply

#: The cluster batch read (`bot.scanner.cluster`), run on each primary: READ_BATCH_LUA's SCAN
#: and reads, with each key's lease tables in the key's own slot (`bot.slots`), named here from
#: `CLUSTER KEYSLOT` and the slot's tag, so this script touches keys of many slots of the node it
#: runs on: Redis 7's `allow-cross-slot-keys` flag. Reads only.
#: ARGV: READ_BATCH_LUA's [1..10] (no KEYS), [11] the previous lease generation, [12] this scan's.
CLUSTER_SCAN_LUA = ("#!lua flags=no-writes,allow-cross-slot-keys\n" + READ_KEY_FN
                    + slots.tag_lua() + _SCAN_PART + """
local pre, g0, g1 = ARGV[10], '}:leases:' .. ARGV[11], '}:leases:' .. ARGV[12]
local prev, done, names = {}, {}, {}
for i = 1, n do
  local k = keys[i]
  local slot = redis.call('CLUSTER', 'KEYSLOT', k)
  local pair = names[slot]
  if not pair then
    local t = pre .. slot_tag(slot)
    pair = {t .. g0, t .. g1}
    names[slot] = pair
  end
  prev[i] = redis.call('HGET', pair[1], k)
  done[i] = redis.call('HEXISTS', pair[2], k) == 1
end
""" + _READ_PART)

#: Writes one batch's lease records into the per-slot tables of the node it runs on.
#: ARGV: [1] the per-slot prefix, [2] the lease generation, then per record: lock key, record.
CLUSTER_WRITE_LUA = ("#!lua flags=allow-cross-slot-keys\n" + slots.tag_lua() + """
local pre, suffix = ARGV[1], '}:leases:' .. ARGV[2]
for i = 3, #ARGV, 2 do
  local k = ARGV[i]
  redis.call('HSET', pre .. slot_tag(redis.call('CLUSTER', 'KEYSLOT', k)) .. suffix, k,
             ARGV[i + 1])
end
return 1
""")
