-- Fixed window. State: the string "<window end µs>:<count>". A window starts
-- with the first request after the previous one ended; a state whose window
-- has ended is the same as no state, so key expiry never changes an answer.
-- Its numbers are counts and times, never a product: its unit is always 1.
local ends, counts = {}, {}

local function check(i, key, now, cost, rate, period, burst, unit)
  local wend, count = now + period, 0
  local v = redis.call('GET', key)
  if v then
    local e, c, p = string.match(v, '^(%d+):(%d+)()')
    e = whole(v, p) and tonumber(e)
    if e and e > now then
      wend, count = e, tonumber(c)
      if e > now + period then
        -- Set by a clock that was ahead: the window ends a period from now.
        -- Written at once, so the correction does not move with now.
        wend = now + period
        redis.call('SET', key, string.format('%d:%d', wend, count), 'PX', ttl(wend, now, 1))
      end
    end
  end
  ends[i], counts[i] = wend, count
  if count + cost <= rate then
    return true, rate - count - cost, 0, wend - now
  end
  return false, math.max(rate - count, 0), wend - now, wend - now
end

local function commit(i, key, now, cost, rate, period, burst, unit)
  local wend = ends[i]
  redis.call('SET', key, string.format('%d:%d%s', wend, counts[i] + cost, suffix), 'PX', ttl(wend, now, 1))
end

-- refund gives back up to cost units consumed no later than since (µs):
-- from the current window only, and not when that window began after since,
-- so a unit consumed in an ended window never frees one in its successor.
-- It reports whether it changed the state.
local function refund(i, key, now, cost, since, rate, period, burst, unit)
  check(i, key, now, 0, rate, period, burst, unit)
  local wend, count = ends[i], counts[i]
  if count == 0 or wend - period > since then
    return false
  end
  redis.call('SET', key, string.format('%d:%d', wend, math.max(count - cost, 0)), 'PX', ttl(wend, now, 1))
  return true
end

-- A charge above what is left takes what is left: the window stays full
-- until the units leave it, so there is nothing to overdraw.
local overdraw = nil
