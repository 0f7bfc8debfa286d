-- Leaky bucket as a meter (GCRA). State: the theoretical arrival time (TAT)
-- as the string "<whole units>:<fraction in 1/rate units>", exact even when
-- the emission interval period/rate is not a whole number of units. The
-- backlog TAT - now, counted in 1/rate units, may hold at most
-- burst × period (within 2^52: rate/period is reduced and the unit chosen
-- for it); each unit of cost adds period. A TAT in the past is the same as
-- no state.
-- A reservation (maxd > 0, in µs) may take the backlog past the capacity,
-- by as much as drains within maxd: the request proceeds when the excess
-- has drained. The state then holds the excess as committed,
-- "<whole>:<fraction>:<excess>", so that a backlog up to capacity plus it
-- is not taken for one a clock that was ahead left. A charge may take the
-- backlog past the capacity too (see overdraw), kept the same way.
local backlogs = {}

-- state is the stored TAT, with the excess reserved past the capacity
-- only when there is one, followed by rec (a call's record) if given.
local function state(w, f, x, rec)
  if x > 0 then
    return string.format('%d:%d:%d%s', w, f, x, rec or '')
  end
  return string.format('%d:%d%s', w, f, rec or '')
end

local function check(i, key, now_us, cost, rate, period, burst, unit, maxd)
  local now = in_units(now_us, unit)
  local cap, need = burst * period, cost * period
  local backlog = 0
  local v = redis.call('GET', key)
  if v then
    local w, f, x, p = string.match(v, '^(%d+):(%d+):?(%d*)()')
    if not whole(v, p) then
      w = nil
    end
    w, f, x = tonumber(w), tonumber(f), tonumber(x) or 0
    local full = cap + x
    if w and w >= now then
      if w - now > math.floor(full / rate) or (w - now) * rate + f > full then
        -- A backlog over the capacity (and the excess reserved) was left by
        -- a clock that was ahead: the bucket is full as of now. Written at
        -- once, so the correction does not move with now.
        w, f = now + math.floor(full / rate), full % rate
        local tat = w
        if f > 0 then
          tat = w + 1
        end
        redis.call('SET', key, state(w, f, x), 'PX', ttl(tat, now_us, unit))
      end
      backlog = (w - now) * rate + f
    end
  end
  backlogs[i] = backlog
  -- A backlog in debt after a charge reaches twice the capacity: the
  -- excess is computed without adding need to it first, which could pass
  -- 2^53.
  local excess = backlog - (cap - need)
  if excess <= 0 then
    local after = backlog + need
    return true, math.floor((cap - after) / period), 0, to_us(math.ceil(after / rate), now_us, now, unit)
  end
  if maxd and maxd > 0 and excess <= 2 ^ 53 - 2 * cap then
    local wait = to_us(math.ceil(excess / rate), now_us, now, unit)
    if wait <= maxd then
      return true, 0, 0, to_us(math.ceil((cap + excess) / rate), now_us, now, unit), wait
    end
  end
  return false, math.max(math.floor((cap - backlog) / period), 0),
    to_us(math.ceil(excess / rate), now_us, now, unit), to_us(math.ceil(backlog / rate), now_us, now, unit)
end

-- put stores the backlog after as of now, with what lies past the
-- capacity as the excess reserved.
local function put(key, after, now_us, rate, period, burst, unit)
  local now = in_units(now_us, unit)
  local whole = math.floor(after / rate)
  redis.call('SET', key, state(now + whole, after - whole * rate, math.max(after - burst * period, 0), suffix),
    'PX', ttl(now + math.ceil(after / rate), now_us, unit))
end

local function commit(i, key, now_us, cost, rate, period, burst, unit)
  put(key, backlogs[i] + cost * period, now_us, rate, period, burst, unit)
end

-- overdraw charges cost units after check of cost 0, taking the backlog
-- past the capacity when it has less room, but not past twice the
-- capacity less one unit: the next request of cost 1 then waits for a
-- whole burst to drain, and never longer. The excess is kept as a
-- reservation's is. A backlog already that long takes nothing. It reports
-- whether it changed the state.
local function overdraw(i, key, now_us, cost, rate, period, burst, unit)
  local high = 2 * burst * period - period
  if backlogs[i] >= high then
    return false
  end
  put(key, math.min(backlogs[i] + cost * period, high), now_us, rate, period, burst, unit)
  return true
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
  -- What stays past the capacity is still reserved, as commit keeps it.
  put(key, after, now_us, rate, period, burst, unit)
  return true
end
