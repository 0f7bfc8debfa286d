-- A concurrency limit: KEYS[1] is a sorted set of the leases a key holds,
-- each member a lease id scored by when it expires, in microseconds on
-- Redis's clock; an id ends in "/<lease µs>", the lease it was taken for.
-- KEYS[2] is the new lease's tombstone, which its release sets. ARGV[1] is
-- the limit, ARGV[2] the lease in microseconds, ARGV[3] the new lease's id.
-- Leases that expired (never released: their instance crashed) are dropped
-- first. Returns "1 <held> 0" when the lease is taken (held counts it),
-- "0 <held> <µs until the earliest lease expires>" when the limit is
-- reached, or "2 <held> 0" when the lease was released already; a denial
-- adds nothing. A call may reach Redis twice (a client sends it again when
-- its reply was lost): a lease id already held is that same acquire,
-- granted without a second count, and one whose tombstone exists was
-- released before this run, which grants it no more.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local wrote = false

local function us(n)
  return string.format('%d', n)
end

redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
-- Set by a clock that was ahead: a lease expires at most its own lease from
-- now. Only leases beyond this call's lease are looked at (none, unless the
-- clock stepped back or limiters with longer leases share the key).
local ahead = redis.call('ZRANGEBYSCORE', key, '(' .. us(now + lease), '+inf', 'WITHSCORES')
for i = 1, #ahead, 2 do
  local own = now + (tonumber(string.match(ahead[i], '/(%d+)$')) or lease)
  if tonumber(ahead[i + 1]) > own then
    redis.call('ZADD', key, us(own), ahead[i])
    wrote = true
  end
end

local held = redis.call('ZCARD', key)
local granted = redis.call('ZSCORE', key, ARGV[3]) ~= false
local released = false
if not granted and held < limit then
  released = redis.call('EXISTS', KEYS[2]) == 1
  if not released then
    redis.call('ZADD', key, us(now + lease), ARGV[3])
    held = held + 1
    granted, wrote = true, true
  end
end
if wrote then
  -- The set lives as long as its latest lease.
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', key, math.ceil((tonumber(last[2]) - now) / 1000))
end
if granted then
  return '1 ' .. us(held) .. ' 0'
elseif released then
  return '2 ' .. us(held) .. ' 0'
end
local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
return '0 ' .. us(held) .. ' ' .. us(tonumber(first[2]) - now)
