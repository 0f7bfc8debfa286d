-- Token bucket. State: a hash {t = tokens × period µs, ts = time of t in µs}.
-- Tokens are counted in units of 1/period so the refill of rate tokens per
-- period is a whole rate units per µs: the arithmetic stays in integers.
-- A missing state is a full bucket, and the key expires when it refills.
local levels, stamps = {}, {}

local function check(i, key, now, cost, rate, period, burst)
  local cap = burst * period
  local tokens, stamp = cap, now
  local v = redis.call('HMGET', key, 't', 'ts')
  if v[1] and v[2] then
    local t, ts = tonumber(v[1]), tonumber(v[2])
    local elapsed = math.max(now - ts, 0)
    if elapsed < math.ceil((cap - t) / rate) then
      tokens = t + elapsed * rate
    end
    -- A clock that went back must not refill the same time twice.
    stamp = math.max(now, ts)
  end
  levels[i], stamps[i] = tokens, stamp
  local need = cost * period
  if tokens >= need then
    local left = tokens - need
    return true, math.floor(left / period), 0, math.ceil((cap - left) / rate)
  end
  return false, math.floor(tokens / period),
    math.ceil((need - tokens) / rate), math.ceil((cap - tokens) / rate)
end

local function commit(i, key, now, cost, rate, period, burst)
  local left = levels[i] - cost * period
  redis.call('HSET', key, 't', string.format('%d', left), 'ts', string.format('%d', stamps[i]))
  local full = stamps[i] + math.ceil((burst * period - left) / rate)
  redis.call('PEXPIRE', key, math.ceil((full - now) / 1000))
end
