-- Sliding window log. State: a sorted set with one member per unit consumed,
-- scored by its time in µs. An entry leaves the window when it is period old.
-- Members are "<time>:<n>", n being the count before it plus its place, so
-- two requests in the same microsecond stay two entries.
local counts = {}

local function check(i, key, now, cost, rate, period, burst)
  -- Entries at or before now - period have left the window. They are only
  -- removed on commit, so a denied request writes nothing.
  local after = '(' .. string.format('%d', now - period)
  local count = redis.call('ZCOUNT', key, after, '+inf')
  counts[i] = count
  if count + cost <= rate then
    return true, rate - count - cost, 0, period
  end
  -- The request fits once the oldest (count + cost - rate) entries have left.
  local need = count + cost - rate
  local oldest = redis.call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', need - 1, 1)
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  return false, math.max(rate - count, 0),
    tonumber(oldest[2]) + period - now, tonumber(newest[2]) + period - now
end

local function commit(i, key, now, cost, rate, period, burst)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - period))
  local count = counts[i]
  local score = string.format('%d', now)
  local args = {}
  for j = 1, cost do
    args[#args + 1] = score
    args[#args + 1] = string.format('%d:%d', now, count + j)
    -- Bounded batches keep the unpack below within Lua's stack limit.
    if #args >= 200 or j == cost then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  redis.call('PEXPIRE', key, math.ceil(period / 1000))
end
