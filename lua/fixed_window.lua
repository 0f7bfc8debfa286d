-- Fixed window. State: the string "<window end µs>:<count>". A window starts
-- with the first request after the previous one ended; a state whose window
-- has ended is the same as no state, so key expiry never changes an answer.
local ends, counts = {}, {}

local function check(i, key, now, cost, rate, period, burst)
  local wend, count = now + period, 0
  local v = redis.call('GET', key)
  if v then
    local e, c = string.match(v, '^(%d+):(%d+)$')
    e = tonumber(e)
    if e and e > now then
      wend, count = e, tonumber(c)
    end
  end
  ends[i], counts[i] = wend, count
  if count + cost <= rate then
    return true, rate - count - cost, 0, wend - now
  end
  return false, math.max(rate - count, 0), wend - now, wend - now
end

local function commit(i, key, now, cost, rate, period, burst)
  local wend = ends[i]
  redis.call('SET', key, string.format('%d:%d', wend, counts[i] + cost),
    'PX', math.ceil((wend - now) / 1000))
end
