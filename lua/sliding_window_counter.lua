-- Sliding window counter. State: the string "<window start>:<current
-- count>:<previous count>", times in the limit's unit. The rolling count is
-- the current window's count plus the previous window's, weighted by the
-- share of it that still lies within one period of now, rounded up. Windows
-- follow each other from the key's first request; once both counts are zero
-- the next request starts a new series, so key expiry never changes an
-- answer. It multiplies a count by a time: rate × period stays within 2^53.
local starts, curs, prevs = {}, {}, {}

local function ceil_div(a, b)
  return math.ceil(a / b)
end

local function check(i, key, now_us, cost, rate, period, burst, unit)
  local now = in_units(now_us, unit)
  local ws, cur, prev = now, 0, 0
  local v = redis.call('GET', key)
  if v then
    local a, b, c, p = string.match(v, '^(%d+):(%d+):(%d+)()')
    if whole(v, p) then
      ws, cur, prev = tonumber(a), tonumber(b), tonumber(c)
      local k = math.floor((now - ws) / period)
      if k == 1 then
        prev, cur = cur, 0
      elseif k >= 2 then
        prev, cur = 0, 0
      end
      if k >= 1 then
        ws = ws + k * period
      end
      if prev == 0 and cur == 0 then
        ws = now
      elseif ws > now then
        -- A window that starts in the future was started by a clock that
        -- was ahead: it starts now, and its counts still count. Written at
        -- once, so the correction does not move with now.
        ws = now
        redis.call('SET', key, string.format('%d:%d:%d', ws, cur, prev), 'PX', ttl(ws + 2 * period, now_us, unit))
      end
    end
  end
  starts[i], curs[i], prevs[i] = ws, cur, prev
  local e = now - ws
  local used = cur + ceil_div(prev * (period - e), period)
  if used + cost <= rate then
    return true, rate - used - cost, 0, to_us(ws + 2 * period - now, now_us, now, unit)
  end
  local reset = ws + period - now
  if cur > 0 then
    reset = reset + period
  end
  -- Find the earliest time the weighted count leaves room for cost.
  local retry
  local room = rate - cur - cost
  if room >= 0 then
    -- Later in this window: prev * (period - x) <= room * period.
    retry = ceil_div(period * (prev - room), prev) - e
  else
    -- In the next window, where the current count becomes the previous one.
    room = rate - cost
    local x = 0
    if cur > room then
      x = ceil_div(period * (cur - room), cur)
    end
    retry = period - e + x
  end
  return false, math.max(rate - used, 0), to_us(retry, now_us, now, unit), to_us(reset, now_us, now, unit)
end

local function commit(i, key, now_us, cost, rate, period, burst, unit)
  redis.call('SET', key, string.format('%d:%d:%d%s', starts[i], curs[i] + cost, prevs[i], suffix),
    'PX', ttl(starts[i] + 2 * period, now_us, unit))
end

-- overdraw charges cost units after check of cost 0, filling the current
-- window's count up to the rate when less is left: the part of the
-- previous window's count that fades during this window then frees no
-- room before the next one. A count already at the rate takes nothing. It
-- reports whether it changed the state.
local function overdraw(i, key, now_us, cost, rate, period, burst, unit)
  local n = math.min(cost, rate - curs[i])
  if n <= 0 then
    return false
  end
  commit(i, key, now_us, n, rate, period, burst, unit)
  return true
end

-- refund gives back up to cost units consumed no later than since (µs):
-- from the current window's count only, not below 0, and not when that
-- window began after since. It reports whether it changed the state.
local function refund(i, key, now_us, cost, since_us, rate, period, burst, unit)
  check(i, key, now_us, 0, rate, period, burst, unit)
  if curs[i] == 0 or starts[i] > in_units(since_us, unit) then
    return false
  end
  redis.call('SET', key, string.format('%d:%d:%d', starts[i], math.max(curs[i] - cost, 0), prevs[i]),
    'PX', ttl(starts[i] + 2 * period, now_us, unit))
  return true
end
