"""The Lua batch read, in two calls: SCAN (the keys found), then every fact of those keys, from one
server instant."""

from __future__ import annotations

#: The most keys a Lua batch may read (`bot.scan.batch_size` sizes each batch below it).
BATCH_KEYS = 250
#: The most SCAN calls one script may make to fill a batch on a sparse keyspace.
MAX_SCAN_CALLS = 16

#: Lua: `read_key(out, m, key, done, previous record, max pairs, max bytes)` appends one live
#: key's 7 reply items after `out[m]` and returns the new `m`; a vanished key returns `m, 'none'`,
#: one this scan already wrote (`done`) `m, 'dup'`, and, on a Redis Cluster, one this node may
#: not serve now (its slot is being resharded to or from it) `m, 'moving'`: all only counted.
#: A previous record (`bot.core.tenures`: version 2, 82 bytes, flags at byte 66) that says the key
#: was a string (flag 8) or a hash (flag 16) saves the TYPE call: the value's first read is then
#: a pcall, and only a WRONGTYPE (the type changed since: rare) costs a TYPE and the new type's
#: reads. A key read this way is counted vanished by its nil OBJECT IDLETIME, still read first.
READ_KEY_FN = """
local function hinted(prev)
  if prev and #prev == 82 and string.byte(prev, 1) == 2 then
    local f = string.byte(prev, 66) % 32
    if f >= 16 then return 'hash' elseif f >= 8 then return 'string' end
  end
  return nil
end
local function says(r, text)  -- an error reply's text has `text`
  return string.find(tostring(r['err']), text, 1, true)
end
local function wrong_type(r)
  if says(r, 'WRONGTYPE') then return true end
  error(r)
end
-- payload, size of a key of type t; nil when it is not of that type
local function read_value(k, t, maxf, maxv)
  if t == 'string' then
    local v = redis.pcall('GET', k)
    if type(v) == 'table' then
      if wrong_type(v) then return nil end
    end
    local len = #v
    if len > maxv then return {string.sub(v, 1, maxv)}, len end  -- cut: no lock token is this long
    return v, len
  elseif t == 'hash' then
    local len = redis.pcall('HLEN', k)
    if type(len) == 'table' then
      if wrong_type(len) then return nil end
    end
    if len <= maxf then return redis.call('HGETALL', k), len end
    return redis.call('HSCAN', k, 0, 'COUNT', maxf)[2], len
  end
  return false, 0
end
local function read_key(out, m, k, done, prev, maxf, maxv)
  local t, idle = hinted(prev), nil
  if t then
    idle = redis.pcall('OBJECT', 'IDLETIME', k)
    if not idle then return m, 'none' end
    if type(idle) ~= 'number' then
      if says(idle, 'non local key') then return m, 'moving' end
      t, idle = nil, -1  -- no idle time kept (an LFU policy): the type is read below
    end
  end
  if not t then
    t = redis.pcall('TYPE', k)
    if t['err'] then
      if says(t, 'non local key') then return m, 'moving' end
      error(t)
    end
    t = t['ok']
    if t == 'none' then return m, 'none' end
  end
  if done then return m, 'dup' end
  if not idle then
    idle = redis.pcall('OBJECT', 'IDLETIME', k)
    if type(idle) ~= 'number' then idle = -1 end
  end
  out[m + 1] = k
  out[m + 3] = idle
  out[m + 4] = redis.call('PTTL', k)
  local payload, len = read_value(k, t, maxf, maxv)
  if payload == nil then  -- the hint was wrong
    t = redis.call('TYPE', k)['ok']
    payload, len = read_value(k, t, maxf, maxv)
    if payload == nil then error('lockguard: ' .. t .. ' read as another type') end
  end
  out[m + 2] = t
  out[m + 5] = payload
  out[m + 6] = len
  out[m + 7] = prev
  return m + 7, nil
end
"""

#: A batch is read in two calls (so Redis need not wait for the client between them): the SCAN,
SCAN_KEYS_LUA = (
    READ_KEY_FN
    + """
-- The first call of a scan's batch: SCAN (again while fewer than ARGV[4] keys were found, at
-- most ARGV[5] calls), and the keys found. Reads only.
-- ARGV: [1] cursor, [2] MATCH pattern, [3] SCAN COUNT, [4] batch size, [5] max SCAN calls,
--       [6] max hash pairs and [7] max string bytes to return (as the read's), [8] own key
--       prefix, [9] the own prefix of the old keyspace format, [10] the prefix of per-slot own
--       keys (`bot.store.keyspace.OWN_PREFIXES`; all three '' when the pattern cannot match
--       any of them: no key is then checked), [11] the longest key read, in bytes
--       (`bot.scan.types.MAX_KEY_BYTES`): a longer one is not returned, only counted, and its
--       first ARGV[12] bytes and length returned for the first ARGV[13] of them; [14] the
--       longest of those whose facts are read too (here, where the key is in hand: it never
--       leaves Redis; '0': none).
-- Reply: {next cursor, SCAN calls, keys SCAN returned, own keys skipped, duplicates skipped,
--         server µs of the SCAN calls, {the keys found: new, unique, not lockguard's own, at
--         most ARGV[11] bytes}, oversized keys skipped, {prefix, length, prefix, length...},
--         {8 items per oversized key read: its first ARGV[12] bytes, type, idle seconds, pttl,
--         payload, size (as the read's), its last ARGV[12] bytes, its length}, TIME's seconds,
--         TIME's microseconds}.
local t0 = redis.call('TIME')
local cursor = ARGV[1]
local want = tonumber(ARGV[4])
local max_calls = tonumber(ARGV[5])
local prefix, legacy, per_slot = ARGV[8], ARGV[9], ARGV[10]
local plen, llen, slen = #prefix, #legacy, #per_slot
local own_check = plen > 0  -- '' for all three: the pattern cannot match lockguard's own keys
local keys, seen = {}, {}
local calls, returned, dups, own = 0, 0, 0, 0
local max_key = tonumber(ARGV[11]) or math.huge
local shown, samples_wanted = tonumber(ARGV[12]) or 0, tonumber(ARGV[13]) or 0
local over, samples, facts = 0, {}, {}
local read_big = tonumber(ARGV[14]) or 0
local maxf, maxv = tonumber(ARGV[6]), tonumber(ARGV[7])
repeat
  local r = redis.call('SCAN', cursor, 'MATCH', ARGV[2], 'COUNT', ARGV[3])
  cursor = r[1]
  calls = calls + 1
  returned = returned + #r[2]
  local own_seen = {}
  for _, k in ipairs(r[2]) do
    if own_check and (string.sub(k, 1, plen) == prefix or string.sub(k, 1, llen) == legacy
        or string.sub(k, 1, slen) == per_slot) then
      own = own + 1
      if own_seen[k] then dups = dups + 1 else own_seen[k] = true end
    elseif #k > max_key then
      over = over + 1
      if #samples < 2 * samples_wanted then
        samples[#samples + 1] = string.sub(k, 1, shown)
        samples[#samples + 1] = #k
        if #k <= read_big then
          local m0 = #facts
          local m, skip = read_key(facts, m0, k, nil, nil, maxf, maxv)
          if not skip then
            facts[m0 + 1] = string.sub(k, 1, shown)
            facts[m0 + 7] = string.sub(k, -shown)
            facts[m0 + 8] = #k
          end
        end
      end
    elseif seen[k] then
      dups = dups + 1
    else
      seen[k] = true
      keys[#keys + 1] = k
    end
  end
until cursor == '0' or #keys >= want or calls >= max_calls
local now = redis.call('TIME')
local scan_us = (tonumber(now[1]) - tonumber(t0[1])) * 1000000 + tonumber(now[2]) - tonumber(t0[2])
return {cursor, calls, returned, own, dups, scan_us, keys, over, samples, facts, now[1], now[2]}
"""
)
SCAN_KEYS_ARGS = 14  # its ARGV

#: Lua: every fact of the `keys`, given `prev` and `done` per key; then the reply.
_READ_PART = """
local m, skip, moving = #out, nil, 0
for i = 1, n do
  m, skip = read_key(out, m, keys[i], done[i], prev[i], maxf, maxv)
  if skip == 'none' then vanished = vanished + 1
  elseif skip == 'moving' then moving = moving + 1
  elseif skip then dups = dups + 1 end
end
out[6] = dups
out[8] = vanished
out[9] = moving
out[13] = since(redis.call('TIME'))
return out
"""

#: Lua: each key's previous record (`prev`) and whether this scan wrote it (`done`), from the two
#: tenure tables `TABLES` names.
_LOOKUP_PART = """
local prev, done = {}, {}
for i = 1, n, 500 do
  local j = math.min(i + 499, n)
  local p = redis.call('HMGET', TABLES[1], unpack(keys, i, j))
  local d = redis.call('HMGET', TABLES[2], unpack(keys, i, j))
  for x = 1, j - i + 1 do
    prev[i + x - 1] = p[x]
    done[i + x - 1] = d[x]
  end
end
"""

HEAD = 13  # items before the first key in a READ_KEYS_LUA reply

#: ...then every fact of the keys one SCAN_KEYS_LUA found, all at one instant. Reads only.
#: KEYS[1]: tenure table of the previous scan (hash), KEYS[2]: tenure table this scan writes.
#: ARGV: [1] the next cursor, [2] SCAN calls, [3] keys SCAN returned, [4] own keys skipped,
#: [5] duplicates skipped, [6] server µs of the SCAN calls (items 1-6 of the SCAN's reply, carried
#: over into this reply's head), [7] max hash pairs to return, [8] max string bytes to return,
#: [9...] the keys.
#: Reply: {next cursor, seconds, microseconds, SCAN calls, keys SCAN returned, duplicates
#: skipped, own keys skipped, vanished keys skipped, keys of a slot being resharded, keys of a
#: slot not in the node's bitmap (the last two on a cluster node only: CLUSTER_READ_KEYS_LUA),
#: keys read, server µs of the SCAN calls, server µs of both calls} then 7 items per live lock
#: key: key, type, idle seconds (-1 unknown), pttl ms, payload (string: bytes, or {first ARGV[8]
#: bytes} when longer; hash: flat pairs; other types: false), size (string length / hash
#: length), previous tenure record or false. Keys already in KEYS[2] (this scan wrote them) and
#: vanished keys are only counted.
_READ_KEYS_HEAD = """
local unpack = unpack or table.unpack
local t0 = redis.call('TIME')
local scan_us = tonumber(ARGV[6])
local maxf, maxv = tonumber(ARGV[7]), tonumber(ARGV[8])
local keys = {}
for i = FIRST, #ARGV do keys[i - FIRST + 1] = ARGV[i] end
local n = #keys
local dups, vanished = tonumber(ARGV[5]), 0
local function since(t)
  return scan_us + (tonumber(t[1]) - tonumber(t0[1])) * 1000000 + tonumber(t[2]) - tonumber(t0[2])
end
local out = {ARGV[1], t0[1], t0[2], tonumber(ARGV[2]), tonumber(ARGV[3]), 0, tonumber(ARGV[4]),
  0, 0, false, n, scan_us, 0}
"""
READ_KEYS_LUA = (
    READ_KEY_FN
    + "local FIRST = 9\n"
    + _READ_KEYS_HEAD
    + "local TABLES = KEYS\n"
    + _LOOKUP_PART
    + _READ_PART
)

#: The SCAN of a batch on each primary of a Redis Cluster, flagged for Redis 7.
CLUSTER_SCAN_KEYS_LUA = "#!lua flags=no-writes\n" + SCAN_KEYS_LUA

#: The read of a batch on each primary of a Redis Cluster, flagged for Redis 7 (its keys are in
#: many slots). No KEYS (declared keys must share a slot): ARGV[9] and [10] are the node's two
#: tenure tables, ARGV[11] a bitmap (bit s % 8 of byte s // 8) of the slots that were this node's
#: when the scan started with their records in ARGV[9]; keys from ARGV[12]. Reply item 10 lists
#: the keys of any other slot (else false), for the scanner to put right.
CLUSTER_READ_KEYS_LUA = (
    "#!lua flags=no-writes,allow-cross-slot-keys\n"
    + READ_KEY_FN
    + "local FIRST = 12\n"
    + _READ_KEYS_HEAD
    + "local TABLES = {ARGV[9], ARGV[10]}\n"
    + _LOOKUP_PART
    + """
local plain, moved = ARGV[11], {}
for i = 1, n do
  local s = redis.call('CLUSTER', 'KEYSLOT', keys[i])
  if bit.band(string.byte(plain, bit.rshift(s, 3) + 1), bit.lshift(1, bit.band(s, 7))) == 0 then
    moved[#moved + 1] = keys[i]
  end
end
if #moved > 0 then out[10] = moved end
"""
    + _READ_PART
)
