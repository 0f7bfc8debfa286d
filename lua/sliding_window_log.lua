-- Sliding window log. State: a sorted set with one member per admission
-- (one request, or a batch's requests at one instant), scored by its time
-- in µs. A member is "<units admitted before it, 16 digits>:<its units>":
-- the running count makes every member unique whatever the clock does, and
-- gives the units in the window from two members, whatever the costs. The
-- scores never decrease along the running count (times a clock that was
-- ahead left are moved back to now), so both orders agree. An entry leaves
-- the window when it is period old. One call's work is a few O(log n)
-- lookups, whatever the cost.
local totals, expired = {}, {}

-- trim is the most expired members one commit removes one by one; a key
-- whose members have all expired is unlinked at once.
local trim = 128

local function member(m)
  local before, n = string.match(m, '^(%d+):(%d+)$')
  return tonumber(before), tonumber(n)
end

-- upgrade rewrites a log of the former format, one member "<time>:<n>"
-- per unit, named by its own score, into one member per unit of this
-- format: once per key, within the period after an upgrade.
local function upgrade(key, last)
  if string.match(last[1], '^(%d+):') ~= last[2] then
    return last
  end
  local all = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  redis.call('DEL', key)
  local args = {}
  for j = 2, #all, 2 do
    args[#args + 1] = all[j]
    args[#args + 1] = string.format('%016d:1', j / 2 - 1)
    if #args >= 200 or j == #all then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  return redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
end

local function check(i, key, now, cost, rate, period, burst, unit)
  -- Numbers, not strings, as arguments: Redis writes a whole number below
  -- 2^53 in plain digits, and no string.format runs per call.
  local cutoff = now - period
  local count, total, newest, gone = 0, 0, now, 0
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[1] then
    last = upgrade(key, last)
    local b, n = member(last[1])
    total, newest = b + n, tonumber(last[2])
    if newest > now then
      -- Times after now were left by a clock that was ahead: the requests
      -- they record happened no later than now. Written at once, so the
      -- correction does not move with now.
      local later = redis.call('ZRANGEBYSCORE', key, '(' .. string.format('%d', now), '+inf')
      local args = {}
      for j = 1, #later do
        args[#args + 1] = string.format('%d', now)
        args[#args + 1] = later[j]
        -- Bounded batches keep the unpack below within Lua's stack limit.
        if #args >= 200 or j == #later then
          redis.call('ZADD', key, 'XX', unpack(args))
          args = {}
        end
      end
      redis.call('PEXPIRE', key, math.ceil(period / 1000))
      newest = now
    end
    -- The members at or before the cutoff have left the window; the first
    -- one after them tells how many units were admitted before the window.
    gone = redis.call('ZCOUNT', key, '-inf', cutoff)
    local first = redis.call('ZRANGE', key, gone, gone)
    if first[1] then
      count = total - member(first[1])
    else
      gone = -1 -- all of them
    end
  end
  totals[i], expired[i] = total, gone
  if count + cost <= rate then
    return true, rate - count - cost, 0, period
  end
  -- The request fits once the oldest (count + cost - rate) units in the
  -- window have left: find, by rank, the member that holds that unit.
  local target = total + cost - rate
  local lo = gone -- count > 0 here, so some member is in the window
  -- Each member holds at least one unit, so the holder's rank is at most
  -- lo + (target - units before the window) - 1: the very rank when every
  -- admission was of one unit, found with one lookup.
  local hi = math.min(redis.call('ZCARD', key) - 1, lo + target - (total - count) - 1)
  if member(redis.call('ZRANGE', key, hi, hi)[1]) < target then
    lo = hi
  end
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local b, n = member(redis.call('ZRANGE', key, mid, mid)[1])
    if b + n >= target then
      hi = mid
    else
      lo = mid + 1
    end
  end
  local holder = redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')
  return false, math.max(rate - count, 0), tonumber(holder[2]) + period - now, newest + period - now
end

local function commit(i, key, now, cost, rate, period, burst, unit)
  local gone = expired[i]
  if gone < 0 then
    -- Every member has left the window.
    redis.call('UNLINK', key)
  elseif gone > 0 then
    redis.call('ZREMRANGEBYRANK', key, 0, math.min(gone, trim) - 1)
  end
  redis.call('ZADD', key, now, string.format('%016d:%d', totals[i], cost))
  redis.call('PEXPIRE', key, math.ceil(period / 1000))
end

-- refund removes up to cost units of the newest admissions in the window,
-- unless since (µs) is a period ago or more: the admission to refund, made
-- no later than since, has then left the window, and what is left belongs
-- to other requests. The newest member is shortened when it holds more
-- units than are left to give back; only the newest may be, so the running
-- counts stay right. It reports whether it changed the state.
local function refund(i, key, now, cost, since, rate, period, burst, unit)
  check(i, key, now, 0, rate, period, burst, unit)
  if since <= now - period then
    return false
  end
  local left, changed = cost, false
  while left > 0 do
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    if not last[1] or tonumber(last[2]) <= now - period then
      break
    end
    local b, n = member(last[1])
    redis.call('ZREM', key, last[1])
    if n > left then
      redis.call('ZADD', key, last[2], string.format('%016d:%d', b, n - left))
      left = 0
    else
      left = left - n
    end
    changed = true
  end
  if changed and expired[i] > 0 then
    -- Drop what has left the window, as commit does, so that a clock
    -- stepping back later finds the same log in every store.
    redis.call('ZREMRANGEBYRANK', key, 0, math.min(expired[i], trim) - 1)
  end
  return changed
end

-- A charge above what is left takes what is left: the window stays full
-- until the units leave it, so there is nothing to overdraw.
local overdraw = nil
