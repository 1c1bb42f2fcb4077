"""The Lua scripts behind `bot.cases.case_store`: each case step is one atomic script. Outcome
records are written by `RECORD_FN` (`bot.release.scripts`, embedded in the release scripts too),
which keeps the case hash's `n_<outcome>` counters exact whatever overwrites what.
"""

from __future__ import annotations

from bot.release.scripts import RECORD_FN

#: Lua, read only: why a lock is left out of case `case_id`: 'self' (in it already), 'in_case'
#: (in another live case: opening, pending or approved, unexpired), 'snoozed' (rejected with the
#: same identity digest, snooze not passed), 'expired' (its snooze passed: the rejection may go),
#: or nil.
HELD_BACK_FN = """
local function held_back(open_locks, rejections, case_prefix, case_id, now, k, digest)
  local owner = redis.call('HGET', open_locks, k)
  if owner then
    local sep = string.find(owner, '|', 1, true)
    local other = string.sub(owner, 1, sep - 1)
    if other == case_id then return 'self' end
    if tonumber(string.sub(owner, sep + 1)) > now
        and redis.call('EXISTS', case_prefix .. other) == 1 then
      local st = redis.call('HGET', case_prefix .. other, 'state')
      if st == 'opening' or st == 'pending' or st == 'approved' then return 'in_case' end
    end
  end
  local rej = redis.call('HGET', rejections, k)
  if rej then
    local d, untl = string.match(rej, '^([^|]*)|([^|]*)')
    if tonumber(untl) <= now then return 'expired' end
    if d == digest then return 'snoozed' end
  end
  return nil
end
"""

# KEYS[1] case hash, KEYS[2] its locks list, KEYS[3] open-locks hash, KEYS[4] rejections hash.
# ARGV[1] case id, ARGV[2] now ms, ARGV[3] expires ms, ARGV[4] ms an opening case lives without
# another batch, ARGV[5] the prefix of case keys (`{lockguard}:case:`), then per lock: key,
# identity digest hex, JSON.
# Returns {added, already in a live case, snoozed}.
ADD_LUA = (
    HELD_BACK_FN
    + """
local now = tonumber(ARGV[2])
local entry = ARGV[1] .. '|' .. ARGV[3]
local added, in_case, snoozed = 0, 0, 0
for i = 6, #ARGV, 3 do
  local k = ARGV[i]
  local why = held_back(KEYS[3], KEYS[4], ARGV[5], ARGV[1], now, k, ARGV[i + 1])
  if why == 'in_case' then
    in_case = in_case + 1
  elseif why == 'snoozed' then
    snoozed = snoozed + 1
  elseif why == 'expired' then
    redis.call('HDEL', KEYS[4], k)
  end
  if why == nil or why == 'expired' then
    redis.call('HSET', KEYS[3], k, entry)
    redis.call('RPUSH', KEYS[2], ARGV[i + 2])
    added = added + 1
  end
end
if added > 0 then
  if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('HSET', KEYS[1], 'id', ARGV[1], 'state', 'opening', 'created_ms', ARGV[2],
               'expires_ms', ARGV[3], 'v', '2')
  end
  redis.call('HINCRBY', KEYS[1], 'lock_count', added)
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
end
return {added, in_case, snoozed}
"""
)

# KEYS[1] open-locks hash, KEYS[2] rejections hash. ARGV[1] the prefix of case keys, ARGV[2] the
# case being opened, ARGV[3] now ms, ARGV[4] the lock's key, ARGV[5] its identity digest hex.
# `held_back`'s answer ('' for nil), changing nothing.
HELD_BACK_LUA = (
    HELD_BACK_FN
    + """
return held_back(KEYS[1], KEYS[2], ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]) or ''
"""
)

# KEYS[1] case hash, KEYS[2] locks list, KEYS[3] cases zset. ARGV[1] case id, ARGV[2] now ms,
# ARGV[3] retention ms, ARGV[4] summary JSON. An opening case becomes pending.
FINISH_LUA = """
if redis.call('HGET', KEYS[1], 'state') ~= 'opening' then return 0 end
redis.call('HSET', KEYS[1], 'state', 'pending', 'summary', ARGV[4])
redis.call('PERSIST', KEYS[1])
redis.call('PERSIST', KEYS[2])
redis.call('ZADD', KEYS[3], tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', tonumber(ARGV[2]) - tonumber(ARGV[3]))
return 1
"""

# KEYS[1] case hash. ARGV[1] expected state(s), '|'-separated, ARGV[2] new state, ARGV[3] now ms,
# then field/value pairs to set with the new state. A pending case past its expiry becomes
# 'expired' first. Returns 'ok' when this call made the transition, else the state that stopped
# it ('missing' when there is no such case).
TRANSITION_LUA = """
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return 'missing' end
if st == 'pending' and tonumber(redis.call('HGET', KEYS[1], 'expires_ms')) <= tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 'state', 'expired')
  st = 'expired'
end
local allowed = false
for s in string.gmatch(ARGV[1], '[^|]+') do
  if s == st then allowed = true end
end
if not allowed then return st end
redis.call('HSET', KEYS[1], 'state', ARGV[2])
for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i+1]) end
return 'ok'
"""

# KEYS[1] case hash. ARGV[1] approver, ARGV[2] now ms, ARGV[3] approvals required, ARGV[4] dry
# run (0|1). One approval, atomically: recorded in `approvals` (`<ms> <approver>` lines) while the
# case is pending and unexpired; the one that reaches ARGV[3] distinct approvers approves it.
# Returns {word, approvals so far}: ok (approved now), waiting (recorded, more needed), same (this
# approver already approved), or the state that refused it (missing, expired, approved, ...).
APPROVE_LUA = """
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return {'missing', 0} end
local now = tonumber(ARGV[2])
if st == 'pending' and tonumber(redis.call('HGET', KEYS[1], 'expires_ms')) <= now then
  redis.call('HSET', KEYS[1], 'state', 'expired')
  st = 'expired'
end
local list = redis.call('HGET', KEYS[1], 'approvals') or ''
local n = 0
for line in string.gmatch(list, '[^\\n]+') do
  n = n + 1
  if string.match(line, '^[^ ]* (.*)$') == ARGV[1] and st == 'pending' then return {'same', n} end
end
if st ~= 'pending' then return {st, n} end
n = n + 1
redis.call('HSET', KEYS[1], 'approvals', list .. ARGV[2] .. ' ' .. ARGV[1] .. '\\n')
if n < tonumber(ARGV[3]) then return {'waiting', n} end
redis.call('HSET', KEYS[1], 'state', 'approved', 'decided_by', ARGV[1], 'decided_ms', ARGV[2],
           'dry_run', ARGV[4])
return {'ok', n}
"""

# KEYS[1] outcomes hash, KEYS[2] case hash. ARGV: index, outcome, JSON body, repeated.
RECORD_LUA = (
    RECORD_FN
    + """
for i = 1, #ARGV, 3 do record(KEYS[1], KEYS[2], ARGV[i], ARGV[i + 1], ARGV[i + 2]) end
return 1
"""
)
