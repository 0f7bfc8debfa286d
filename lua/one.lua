-- One request of a plain cost for one key of a limiter with one limit: the
-- most common call, decided without the driver's groups, kinds and loops,
-- which cost Redis more than the decision itself. The limit's rate, period,
-- burst and unit (as the driver takes them) are written into the script as
-- RATE, PERIOD, BURST and UNIT (see OneRequest). KEYS[1] is the state and,
-- in a deciding call, KEYS[2] the key that keeps the call's reply; ARGV[1]
-- is the cost and, in a deciding call, ARGV[2] how long (ms) to keep the
-- reply, negated when the call may have been sent before. The answer is
-- the driver's.
local once, once_ttl = KEYS[2], tonumber(ARGV[2])
if once and once_ttl < 0 then
  once_ttl = -once_ttl
  local kept = redis.call('GET', once)
  if kept then
    return kept
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local function decide_one()
  local key, cost = KEYS[1], tonumber(ARGV[1])
  local allowed, remaining, retry, reset = check(1, key, now, cost, RATE, PERIOD, BURST, UNIT, 0)
  if not allowed then
    return string.format('0 1 %d %d %d', remaining, retry, reset)
  end
  commit(1, key, now, cost, RATE, PERIOD, BURST, UNIT)
  local reply = string.format('1 1 %d 0 %d', remaining, reset)
  if once then
    redis.call('SET', once, reply, 'PX', once_ttl)
  end
  return reply
end

local ok, res = pcall(decide_one)
if not ok then
  return redis.error_reply(type(res) == 'table' and res.err or tostring(res))
end
return res
