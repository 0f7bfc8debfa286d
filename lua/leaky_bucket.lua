-- Leaky bucket as a meter (GCRA). State: the theoretical arrival time (TAT)
-- as the string "<whole µs>:<fraction in 1/rate µs>", exact even when the
-- emission interval period/rate is not a whole number of µs. The backlog
-- TAT - now, counted in 1/rate µs, may hold at most burst × period; each unit
-- of cost adds period. A TAT in the past is the same as no state.
local backlogs = {}

local function check(i, key, now, cost, rate, period, burst)
  local backlog = 0
  local v = redis.call('GET', key)
  if v then
    local w, f = string.match(v, '^(%d+):(%d+)$')
    w, f = tonumber(w), tonumber(f)
    if w and w >= now then
      backlog = (w - now) * rate + f
    end
  end
  backlogs[i] = backlog
  local cap, need = burst * period, cost * period
  if backlog + need <= cap then
    local after = backlog + need
    return true, math.floor((cap - after) / period), 0, math.ceil(after / rate)
  end
  -- After the clock went back the backlog can exceed the capacity.
  return false, math.floor(math.max(cap - backlog, 0) / period),
    math.ceil((backlog + need - cap) / rate), math.ceil(backlog / rate)
end

local function commit(i, key, now, cost, rate, period, burst)
  local after = backlogs[i] + cost * period
  local whole = math.floor(after / rate)
  redis.call('SET', key, string.format('%d:%d', now + whole, after - whole * rate),
    'PX', math.ceil(math.ceil(after / rate) / 1000))
end
