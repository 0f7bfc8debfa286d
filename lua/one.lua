-- One request of a plain cost for one key of a limiter with one limit: the
-- most common call, decided without the driver's groups, kinds and loops,
-- which cost Redis more than the decision itself. The limit's rate, period,
-- burst and unit (as the driver takes them) are written into the script as
-- RATE, PERIOD, BURST and UNIT (see OneRequest). KEYS[1] is the state and
-- ARGV[1] the cost. The answer is the driver's.
--
-- A deciding call counts once however often the client sends it. With
-- every algorithm but the sliding log, it passes its id as ARGV[2], with
-- "!" appended when the client may have sent it before, and an admitting
-- call leaves its record after the state it commits, "|<id> <reply>"
-- (suffix, see units.lua): a call sent again that finds it answers from it.
-- The sliding log, whose state is a sorted set, passes instead the key
-- that keeps the reply as KEYS[2], and ARGV[2] how long (ms) to keep it,
-- negated when the call may have been sent before.
local key, once, id = KEYS[1], KEYS[2], nil
local once_ttl
if once then
  local kept
  kept, once_ttl = kept_reply(once, ARGV[2])
  if kept then
    return kept
  end
elseif ARGV[2] then
  id = ARGV[2]
  if string.byte(id, -1) == 33 then -- '!': sent before
    id = string.sub(id, 1, -2)
    local kept = recorded(key, id)
    if kept then
      return kept
    end
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local function decide_one()
  local cost = tonumber(ARGV[1])
  local allowed, remaining, retry, reset = check(1, key, now, cost, RATE, PERIOD, BURST, UNIT, 0)
  if not allowed then
    return string.format('0 1 %d %d %d', remaining, retry, reset)
  end
  local reply = string.format('1 1 %d 0 %d', remaining, reset)
  if id then
    suffix = '|' .. id .. ' ' .. reply
  end
  commit(1, key, now, cost, RATE, PERIOD, BURST, UNIT)
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
