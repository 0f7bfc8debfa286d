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
local cost = tonumber(ARGV[1])

-- check and commit raise an error on a key of another type or a refused
-- write; pcall calls each of them directly, with no closure to make on
-- every call, and the error answers as the driver's. res is check's
-- verdict, then commit's error when it raised one.
local reply
local ok, res, remaining, retry, reset = pcall(check, 1, key, now, cost, RATE, PERIOD, BURST, UNIT, 0)
if ok and res then
  reply = string.format('1 1 %d 0 %d', remaining, reset)
  if id then
    suffix = '|' .. id .. ' ' .. reply
  end
  ok, res = pcall(commit, 1, key, now, cost, RATE, PERIOD, BURST, UNIT)
end
if not ok then
  return redis.error_reply(type(res) == 'table' and res.err or tostring(res))
end
if not reply then
  return string.format('0 1 %d %d %d', remaining, retry, reset)
end
if once then
  local kept = redis.pcall('SET', once, reply, 'PX', once_ttl)
  if type(kept) == 'table' and kept.err then
    return kept
  end
end
return reply
