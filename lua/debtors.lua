-- The stores that owe a prefix's keys charges after a fault, so that the
-- others hold their gates until those charges have landed.
--
-- KEYS[1]: a sorted set of store ids, each scored by when (ms, on Redis's
-- clock) its entry lapses unless renewed.
-- ARGV[1]: the calling store's id; ARGV[2]: "+" it owes (renew its entry),
-- "-" it owes nothing now (drop its entry), "?" only ask; ARGV[3]: how
-- long (ms) an entry lives unless renewed.
-- Returns how many other stores owe.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local self = 0
if ARGV[2] == '+' then
	redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
	redis.call('PEXPIRE', KEYS[1], ttl)
	self = 1
elseif ARGV[2] == '-' then
	redis.call('ZREM', KEYS[1], ARGV[1])
elseif redis.call('ZSCORE', KEYS[1], ARGV[1]) then
	self = 1
end
return redis.call('ZCARD', KEYS[1]) - self
