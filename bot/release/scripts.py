"""The release scripts: one Lua compare-and-delete per layout family, and their reply table.

Each compares what it finds with exactly what the human approved and only then acts, in the same
atomic step waking the library's waiters, publishing the reclaim event and recording the outcome:
a crash never separates a deletion from its event, and a resumed release finds the outcome
instead of re-labelling the lock `already_gone`.

KEYS: [1] the lock, [2] the case's outcomes hash, [3] the case hash (on a Redis Cluster both are
the lock's receipt hash, in its slot), [4] optional, one server only: python-redis-lock's signal
list.

ARGV: [1] op: 'del', 'delay' (lock-delay: shorten the TTL) or 'check' (verification: changes and
records nothing); [2] the lock's index in its case ('' = nothing recorded); [3] approved PTTL ms
(-1: no expiry); [4] server ms of that reading; [5] re-arm slack ms; [6] grace ms; [7] release
channel ('' = publish nothing); [8] the event JSON up to its time fields; [9] Redisson's channel to
wake waiters on ('' none), [10] its message; [11] signal list expiry ms; [12..] the approved value
(string), field/value pairs (hash), or count and '1' when contenders may keep counting (counter).

Reply: `{code, pttl, why, number, event}`, decoded only by `bot.release.reply`: `Code` says what
the others carry (pttl -2, why '' and number 0 otherwise); event, for codes 1-3: 'sent',
'refused' (PUBLISH refused: the deletion stands) or '' (no channel). The outcome record
(`<outcome>\\n<JSON>`) carries code, why, pttl, number and, once acted on, `event_published` and
`at_ms`; the script records `error` (code -3, why 'pending') before touching the lock.
"""

from __future__ import annotations

import enum

#: Lua: record(outcomes hash, case hash, index, outcome, JSON body).
RECORD_FN = """
local function record(outs, case, idx, outcome, body)
  local prev = redis.call('HGET', outs, idx)
  if prev then redis.call('HINCRBY', case, 'n_' .. string.match(prev, '^[^\\n]*'), -1) end
  redis.call('HSET', outs, idx, outcome .. '\\n' .. body)
  redis.call('HINCRBY', case, 'n_' .. outcome, 1)
end
"""


class Code(enum.IntEnum):
    #: Deleted (op 'del'), the library's waiters woken.
    DELETED = 1
    #: Lock-delay: TTL set to the grace; pttl = the grace.
    DELAYED = 2
    #: Lock-delay: TTL already within the grace, left as is; pttl = that TTL.
    DELAY_KEPT = 3
    #: Op 'check': the approved holder is still there; pttl = its PTTL.
    MATCH = 4
    #: Already decided by an earlier run (a lost reply retried, a resumed release); nothing was
    #: done now. why = the outcome that run recorded.
    EARLIER = 5
    #: The key is missing.
    GONE = 0
    #: Changed since approval, left untouched. why: 'type' | 'value' | 'field' | 'extra' |
    #: 'integer' | 'count' | 'count_grew' | 'rearmed'; number = the count (counters).
    CHANGED = -1
    #: The same holder, its TTL re-armed since approval: left alone. why: 'rearmed' |
    #: 'expiry_added' | 'expiry_removed'; number = the PTTL the approved reading predicts.
    RENEWED = -2
    #: Redis refused the delete (or the lock-delay PEXPIRE): nothing changed. why = 'refused'.
    REFUSED = -3


class Event(enum.StrEnum):
    NONE = ""
    SENT = "sent"
    REFUSED = "refused"


_COMMON = (
    RECORD_FN
    + """
local OP, OUT, CASE, IDX = ARGV[1], KEYS[2], KEYS[3], ARGV[2]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- ms since the Unix epoch -> 'YYYY-MM-DDTHH:MM:SS.mmmZ' (days-to-civil, proleptic Gregorian).
local function iso(ms)
  local s = math.floor(ms / 1000)
  local z = math.floor(s / 86400)
  local secs = s - z * 86400
  z = z + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
                         - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', y, m, d, math.floor(secs / 3600),
                       math.floor(secs % 3600 / 60), secs % 60, ms % 1000)
end
-- A reply: {code, pttl, why, number, event}; `act` fills in the event of a lock acted on.
local function answer(code, pttl, why, number) return {code, pttl, why, number, ''} end
-- Record the outcome (not for 'check' or case-less calls) and return the reply.
local function done(outcome, reply, extra)
  if IDX ~= '' and OP ~= 'check' then
    record(OUT, CASE, IDX, outcome, '{"code":' .. reply[1] .. ',"why":"' .. reply[3] ..
           '","pttl":' .. reply[2] .. ',"number":' .. reply[4] .. (extra or '') .. '}')
  end
  return reply
end
-- An earlier run already decided this lock (a lost reply retried, a resumed release)?
local function earlier()
  if IDX == '' or OP == 'check' then return nil end
  local prev = redis.call('HGET', OUT, IDX)
  if prev and string.sub(prev, 1, 6) ~= 'error\\n' then
    return answer(5, -2, string.match(prev, '^[^\\n]*'), 0)
  end
  return nil
end
-- Publish the reclaim event; false when there is no channel or Redis refused it (an ACL
-- without the channel): the deletion stands and its record says no event went out.
local function announce(event, t)
  if ARGV[7] == '' then return false end
  local r = redis.pcall('PUBLISH', ARGV[7], ARGV[8] .. '"event":"' .. event ..
                        '","released_at":"' .. iso(t) .. '","released_at_ms":' ..
                        string.format('%d', t) .. '}')
  return not (type(r) == 'table' and r.err)
end
-- Was the TTL re-armed since the approved reading? Returns why ('' = no) and the expected PTTL.
local function renewed(pttl)
  local approved, observed, slack = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
  if approved < 0 then
    if pttl >= 0 then return 'expiry_added', -1 end
    return '', -1
  end
  local expected = approved - (now_ms() - observed)
  if pttl < 0 then return 'expiry_removed', expected end
  if pttl > expected + slack then return 'rearmed', expected end
  return '', expected
end
-- The compare succeeded: check reports; otherwise a re-armed TTL (when `rearm_test`) stops it,
-- 'delay' shortens the TTL, 'del' deletes and wakes waiters; both announce and record.
local function act(key, rearm_test, number)
  local pttl = redis.call('PTTL', key)
  if OP == 'check' then return answer(4, pttl, '', number) end
  if rearm_test then
    local why, expected = renewed(pttl)
    if why ~= '' then return done('recovered', answer(-2, pttl, why, expected)) end
  end
  local t = now_ms()
  -- Record first: a script error stops at the first failing command without undoing the ones
  -- before it, so the write that may be refused (lockguard's own case keys: ACL, OOM) goes
  -- before the lock is touched. The delete itself is a pcall (an ACL may refuse DEL): refused,
  -- the record says error. After it nothing may fail: wake-ups and the event are pcalls, and a
  -- refused event is recorded as not published.
  done('error', answer(-3, -2, 'pending', 0))
  local reply, event, r
  if OP == 'delay' then
    local grace = tonumber(ARGV[6])
    if pttl >= 0 and pttl <= grace then
      reply = answer(3, pttl, '', number)
    else
      r = redis.pcall('PEXPIRE', key, grace)
      if type(r) == 'table' and r.err then return done('error', answer(-3, -2, 'refused', 0)) end
      reply = answer(2, grace, '', number)
    end
    event = 'lock_delayed'
  else
    r = redis.pcall('DEL', key)
    if type(r) == 'table' and r.err then return done('error', answer(-3, -2, 'refused', 0)) end
    if KEYS[4] then
      -- python-redis-lock's wake-up list: emptied and given one element, as its own unlock
      -- does; a key of another type there is someone else's and is left alone
      local kind = redis.pcall('TYPE', KEYS[4])
      kind = type(kind) == 'table' and kind.ok or kind
      if kind == 'list' or kind == 'none' then
        redis.pcall('DEL', KEYS[4])
        redis.pcall('LPUSH', KEYS[4], 1)
        redis.pcall('PEXPIRE', KEYS[4], ARGV[11])
      end
    end
    if ARGV[9] ~= '' then redis.pcall('PUBLISH', ARGV[9], ARGV[10]) end
    reply, event = answer(1, -2, '', number), 'lock_released'
  end
  local sent = announce(event, t)
  if ARGV[7] ~= '' then reply[5] = sent and 'sent' or 'refused' end
  return done('released', reply, ',"event_published":' .. (sent and 'true' or 'false') ..
              ',"at_ms":' .. string.format('%d', t))
end
local function gone() return done('already_gone', answer(0, -2, '', 0)) end
local function changed(why, number)
  return done('skipped_reacquired', answer(-1, -2, why, number or 0))
end
-- The start every script shares: an earlier run's outcome, a missing key, another type.
local function opening(want)
  local prev = earlier()
  if prev then return prev end
  local t = redis.call('TYPE', KEYS[1])['ok']
  if t == 'none' then return gone() end
  if t ~= want then return changed('type') end
  return nil
end
"""
)

STRING_LUA = (
    _COMMON
    + """
local early = opening('string')
if early then return early end
local k = KEYS[1]
if redis.call('GET', k) ~= ARGV[12] then return changed('value') end
return act(k, true, 0)
"""
)

HASH_LUA = (
    _COMMON
    + """
local early = opening('hash')
if early then return early end
local k = KEYS[1]
local n = 0
for i = 12, #ARGV, 2 do
  local v = redis.call('HGET', k, ARGV[i])
  if not v then return changed('field') end
  if v ~= ARGV[i + 1] then return changed('value') end
  n = n + 1
end
if redis.call('HLEN', k) ~= n then return changed('extra') end
return act(k, true, 0)
"""
)

COUNTER_LUA = (
    _COMMON
    + """
-- No token: the same lease only while the key is still an integer whose count did not drop
-- (a DEL and a fresh INCR starts again at 1). At the approved count the TTL must have run down
-- as approved (re-armed with no new INCR: re-created or renewed). Above it, only a lock kept
-- alive by contenders (ARGV[13] = '1') may have grown: every contender re-arms its TTL, which
-- is exactly how such a lock stays alive, so no re-arm test then.
local early = opening('string')
if early then return early end
local k = KEYS[1]
local v = redis.call('GET', k)
if #v > 18 or not string.match(v, '^%-?%d+$') then return changed('integer') end
local count, approved = tonumber(v), tonumber(ARGV[12])
if count < approved then return changed('count', count) end
if count > approved then
  if ARGV[13] ~= '1' then return changed('count_grew', count) end
  return act(k, false, count)
end
if OP ~= 'check' and renewed(redis.call('PTTL', k)) ~= '' then return changed('rearmed', count) end
return act(k, false, count)
"""
)
