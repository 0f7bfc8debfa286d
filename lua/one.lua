-- One request of a plain cost for one key of a limiter with one limit: the
-- most common call, decided without the driver's groups, kinds and loops,
-- which cost Redis more than the decision itself. KEYS and ARGV are laid
-- out as for driver.lua (KEYS[1] the state, KEYS[2] the key that keeps a
-- deciding call's reply; ARGV[1] the cost, the limit's rate, period, burst
-- and unit, then how long to keep the reply, negated when the call may
-- have been sent before), and so is the answer.
local once, once_ttl = KEYS[2], tonumber(ARGV[6])
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
  local rate, period, burst, unit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
  local allowed, remaining, retry, reset = check(1, key, now, cost, rate, period, burst, unit, 0)
  if not allowed then
    return string.format('0 1 %d %d %d', remaining, retry, reset)
  end
  commit(1, key, now, cost, rate, period, burst, unit)
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
