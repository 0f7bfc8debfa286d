-- Token bucket. State: the string "<tokens × period>:<time of them>", the
-- time in the limit's unit (older scripts kept a hash {t, ts}, still read). Tokens are counted in units of 1/period so the refill
-- of rate tokens per period is a whole rate units per time unit: the
-- arithmetic stays in integers, with rate/period reduced and a unit chosen
-- so that burst × period stays within 2^52. A missing state is a full
-- bucket, and the key expires when it refills.
-- A reservation (maxd > 0, in µs) may take the level below zero, by as
-- much as refills within maxd: the request proceeds when the level is
-- back at zero, and the requests after it wait for the debt too. A charge
-- may take it below zero too (see overdraw).
local levels = {}

-- read returns the stored level and its time, or nil: from the string
-- state, or from the hash {t, ts} that older scripts kept.
local function read(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' then
    if not string.find(v.err, 'WRONGTYPE', 1, true) then
      error(v)
    end
    v = redis.call('HMGET', key, 't', 'ts')
    if v[1] and v[2] then
      return tonumber(v[1]), tonumber(v[2])
    end
    return nil
  end
  if v then
    local t, ts, p = string.match(v, '^(%-?%d+):(%d+)()')
    if whole(v, p) then
      return tonumber(t), tonumber(ts)
    end
  end
  return nil
end

-- write stores level t as of time ts (units), until the bucket is full.
local function write(key, t, ts, now_us, rate, cap, unit)
  redis.call('SET', key, string.format('%d:%d%s', t, ts, suffix), 'PX', ttl(ts + math.ceil((cap - t) / rate), now_us, unit))
end

local function check(i, key, now_us, cost, rate, period, burst, unit, maxd)
  local now = in_units(now_us, unit)
  local cap = burst * period
  local tokens = cap
  local t, ts = read(key)
  if t and ts then
    if ts > now then
      -- Stamped by a clock that was ahead: the level is as of now, and
      -- refills from now. Written at once, so the correction does not move
      -- with now.
      ts = now
      write(key, t, now, now_us, rate, cap, unit)
    end
    if now - ts < math.ceil((cap - t) / rate) then
      tokens = t + (now - ts) * rate
    end
  end
  levels[i] = tokens
  local need = cost * period
  if tokens >= need then
    local left = tokens - need
    return true, math.floor(left / period), 0, to_us(math.ceil((cap - left) / rate), now_us, now, unit)
  end
  local debt = need - tokens
  if maxd and maxd > 0 and debt <= 2 ^ 53 - 2 * cap then
    local wait = to_us(math.ceil(debt / rate), now_us, now, unit)
    if wait <= maxd then
      return true, 0, 0, to_us(math.ceil((cap + debt) / rate), now_us, now, unit), wait
    end
  end
  return false, math.floor(math.max(tokens, 0) / period),
    to_us(math.ceil((need - tokens) / rate), now_us, now, unit), to_us(math.ceil((cap - tokens) / rate), now_us, now, unit)
end

-- put stores the level left as of now.
local function put(key, left, now_us, rate, period, burst, unit)
  local now = in_units(now_us, unit)
  write(key, left, now, now_us, rate, burst * period, unit)
end

local function commit(i, key, now_us, cost, rate, period, burst, unit)
  put(key, levels[i] - cost * period, now_us, rate, period, burst, unit)
end

-- overdraw charges cost tokens after check of cost 0, taking the level
-- below zero when it has less, but not below one token more than minus
-- the burst: the next request of cost 1 then waits for a whole burst to
-- refill, and never longer. A level already that low (a reservation's
-- debt) takes nothing. It reports whether it changed the state.
local function overdraw(i, key, now_us, cost, rate, period, burst, unit)
  local low = (1 - burst) * period
  if levels[i] <= low then
    return false
  end
  put(key, math.max(levels[i] - cost * period, low), now_us, rate, period, burst, unit)
  return true
end

-- refund puts cost tokens back, the bucket capped at burst: a refund never
-- leaves more than a full bucket. It reports whether it changed the state.
local function refund(i, key, now_us, cost, since_us, rate, period, burst, unit)
  check(i, key, now_us, 0, rate, period, burst, unit)
  local now, cap = in_units(now_us, unit), burst * period
  if levels[i] >= cap then
    return false
  end
  local t = math.min(levels[i] + cost * period, cap)
  if t >= cap then
    -- A full bucket is no state.
    redis.call('UNLINK', key)
    return true
  end
  write(key, t, now, now_us, rate, cap, unit)
  return true
end
