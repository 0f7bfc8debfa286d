-- A concurrency limit: KEYS[1] is a sorted set of the leases a key holds,
-- each member a lease id scored by when it expires, in microseconds on
-- Redis's clock. ARGV[1] is the limit, ARGV[2] the lease in microseconds,
-- ARGV[3] the new lease's id. Leases that expired (never released: their
-- instance crashed) are dropped first. Returns "1 <held> 0" when the lease
-- is taken (held counts it), or "0 <held> <µs until the earliest lease
-- expires>" when the limit is reached; a denial adds nothing. A call may
-- reach Redis twice (a client sends it again when its reply was lost): a
-- lease id already held is that same acquire, granted without a second
-- count.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])

redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local held = redis.call('ZCARD', key)
if redis.call('ZSCORE', key, ARGV[3]) then
  return '1 ' .. string.format('%d', held) .. ' 0'
end
if held < limit then
  redis.call('ZADD', key, now + lease, ARGV[3])
  -- The set lives as long as its latest lease; a limiter with a shorter
  -- lease on the same key must not cut another's short.
  local ms = math.ceil(lease / 1000)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
  return '1 ' .. string.format('%d', held + 1) .. ' 0'
end
local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
return '0 ' .. string.format('%d', held) .. ' ' .. string.format('%d', tonumber(first[2]) - now)
