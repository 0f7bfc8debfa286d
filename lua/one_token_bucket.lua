-- The token bucket's one-request script for a limit of unit 1, between
-- one_start.lua and one_end.lua: check and commit of token_bucket.lua for
-- one request of a plain cost, no reservation, step for step, written out
-- as statements so that a call defines no function (see
-- one_fixed_window.lua). It answers, writes and keeps records as the
-- driver does: TestOneScriptMatchesDriver and
-- TestOneAndBatchMatchDriverOnOddStates prove it.
local cap = BURST * PERIOD
local tokens = cap
local level, stamp -- the state read: the level and its time, or nil
local v = redis.pcall('GET', key)
if type(v) == 'table' then
  if not string.find(v.err, 'WRONGTYPE', 1, true) then
    return v
  end
  local h = redis.pcall('HMGET', key, 't', 'ts') -- the former hash
  if h.err then
    return h
  end
  if h[1] and h[2] then
    level, stamp = tonumber(h[1]), tonumber(h[2])
  end
elseif v then
  local a, b, p = string.match(v, '^(%-?%d+):(%d+)()')
  if p and (p > #v or string.byte(v, p) == 124) then
    level, stamp = tonumber(a), tonumber(b)
  end
end
if level and stamp then
  if stamp > now then
    -- Stamped by a clock that was ahead: the level is as of now.
    stamp = now
    local set = redis.pcall('SET', key, string.format('%d:%d', level, now),
      'PX', math.max(math.ceil(math.ceil((cap - level) / RATE) / 1000), 1))
    if type(set) == 'table' and set.err then
      return set
    end
  end
  if now - stamp < math.ceil((cap - level) / RATE) then
    tokens = level + (now - stamp) * RATE
  end
end
local need = cost * PERIOD
if tokens < need then
  return string.format('0 1 %d %d %d', math.floor(math.max(tokens, 0) / PERIOD),
    math.ceil((need - tokens) / RATE), math.ceil((cap - tokens) / RATE))
end
local left = tokens - need
local full = math.ceil((cap - left) / RATE) -- µs until the bucket is full
local reply = string.format('1 1 %d 0 %d', math.floor(left / PERIOD), full)
local record = id and '|' .. id .. ' ' .. reply or ''
local set = redis.pcall('SET', key, string.format('%d:%d%s', left, now, record), 'PX', math.max(math.ceil(full / 1000), 1))
if type(set) == 'table' and set.err then
  return set
end
