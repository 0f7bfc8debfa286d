-- Leaky bucket as a meter (GCRA). State: the theoretical arrival time (TAT)
-- as the string "<whole units>:<fraction in 1/rate units>", exact even when
-- the emission interval period/rate is not a whole number of units. The
-- backlog TAT - now, counted in 1/rate units, may hold at most
-- burst × period (within 2^52: rate/period is reduced and the unit chosen
-- for it); each unit of cost adds period. A TAT in the past is the same as
-- no state.
local backlogs = {}

local function check(i, key, now_us, cost, rate, period, burst, unit)
  local now = in_units(now_us, unit)
  local cap, need = burst * period, cost * period
  local backlog = 0
  local v = redis.call('GET', key)
  if v then
    local w, f = string.match(v, '^(%d+):(%d+)$')
    w, f = tonumber(w), tonumber(f)
    if w and w >= now then
      if w - now > math.floor(cap / rate) or (w - now) * rate + f > cap then
        -- A backlog over the capacity was left by a clock that was ahead:
        -- the bucket is full as of now. Written at once, so the correction
        -- does not move with now.
        w, f = now + math.floor(cap / rate), cap % rate
        local tat = w
        if f > 0 then
          tat = w + 1
        end
        redis.call('SET', key, string.format('%d:%d', w, f), 'PX', ttl(tat, now_us, unit))
      end
      backlog = (w - now) * rate + f
    end
  end
  backlogs[i] = backlog
  if backlog + need <= cap then
    local after = backlog + need
    return true, math.floor((cap - after) / period), 0, to_us(math.ceil(after / rate), now_us, now, unit)
  end
  return false, math.floor((cap - backlog) / period),
    to_us(math.ceil((backlog + need - cap) / rate), now_us, now, unit), to_us(math.ceil(backlog / rate), now_us, now, unit)
end

local function commit(i, key, now_us, cost, rate, period, burst, unit)
  local now = in_units(now_us, unit)
  local after = backlogs[i] + cost * period
  local whole = math.floor(after / rate)
  redis.call('SET', key, string.format('%d:%d', now + whole, after - whole * rate),
    'PX', ttl(now + math.ceil(after / rate), now_us, unit))
end

-- refund moves the TAT back by cost emission intervals, not before now.
-- It reports whether it changed the state.
local function refund(i, key, now_us, cost, since_us, rate, period, burst, unit)
  check(i, key, now_us, 0, rate, period, burst, unit)
  if backlogs[i] == 0 then
    return false
  end
  local after = math.max(backlogs[i] - cost * period, 0)
  if after == 0 then
    redis.call('UNLINK', key)
    return true
  end
  local now = in_units(now_us, unit)
  local whole = math.floor(after / rate)
  redis.call('SET', key, string.format('%d:%d', now + whole, after - whole * rate),
    'PX', ttl(now + math.ceil(after / rate), now_us, unit))
  return true
end
