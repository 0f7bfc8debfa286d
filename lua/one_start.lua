-- The start of every one-request script (see one.lua and one_*.lua),
-- written as statements, not functions, so that a call defines nothing
-- before it decides. It answers a call sent before from what its first
-- run left, and otherwise reads the clock.
--
-- A deciding call passes, with every algorithm but the sliding log, its id
-- as ARGV[2], with "!" appended when the client may have sent it before;
-- an admitting call leaves its record after the state it commits,
-- "|<id> <reply>", and a call sent again that finds it answers from it.
-- The sliding log, whose state is a sorted set, passes instead the key
-- that keeps the reply as KEYS[2], and ARGV[2] how long (ms) to keep it,
-- negated when the call may have been sent before.
local key, once, id, once_ttl = KEYS[1], KEYS[2], nil, nil
if once then
  once_ttl = tonumber(ARGV[2])
  if once_ttl < 0 then
    once_ttl = -once_ttl
    local kept = redis.call('GET', once)
    if kept then
      return kept
    end
  end
elseif ARGV[2] then
  id = ARGV[2]
  if string.byte(id, -1) == 33 then -- '!': sent before
    id = string.sub(id, 1, -2)
    local v = redis.pcall('GET', key) -- a state of another type has no record
    local at = type(v) == 'string' and string.find(v, '|' .. id .. ' ', 1, true)
    if at then
      return string.sub(v, at + #id + 2)
    end
  end
end
local cost = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
