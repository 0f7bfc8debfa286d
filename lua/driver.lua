-- Decides each request of ARGV[1], a list of costs separated by spaces, in
-- that order, all at one instant: a batch of requests for one key costs one
-- script call and gets exactly the answers they would have got one by one.
-- A cost written "p<cost>" is a peek: the answer such a request would get,
-- with nothing consumed.
-- For each request it runs check for every limit, then commit for every
-- limit only when all of them allow it, so a request consumes from all
-- limits or none. Time comes from the Redis server so every application
-- instance shares one clock; it is kept in integer microseconds, exact in a
-- Lua number.

-- A call may reach Redis twice: a client sends a command again when its
-- reply was lost (a broken connection, a timeout), after the first may have
-- run. So a call that decides (not a peek) passes one key more than it has
-- limits, unique to the call and in the same slot, and after the limits'
-- arguments how long (ms) to keep its reply there. A call that finds that
-- key has run before: it returns the first run's reply, deciding nothing.
-- Below, KEYS names the limits' keys only: a copy without the call's, as
-- some Redis-compatible servers keep the KEYS of a script read-only.
local once, once_ttl
local KEYS = KEYS
if #ARGV == 3 * #KEYS - 1 then
  once, once_ttl = KEYS[#KEYS], ARGV[#ARGV]
  KEYS = {unpack(KEYS, 1, #KEYS - 1)}
  local kept = redis.call('GET', once)
  if kept then
    return kept
  end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- limit returns the rate, period (µs) and burst of limit i.
local function limit(i)
  local a = 3 * i - 1
  return tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
end

-- decide returns one request's answer as five integers; a peek commits
-- nothing.
local function decide(cost, peek)
  local allowed = 1
  local bind, bind_remaining, bind_reset = 0, 0, 0
  local deny_bind, deny_remaining, deny_retry, deny_reset = 0, 0, -1, 0
  for i = 1, #KEYS do
    local ok, remaining, retry, reset = check(i, KEYS[i], now, cost, limit(i))
    if ok then
      -- A pass reports the limit with the least left, the later reset on a tie.
      if bind == 0 or remaining < bind_remaining or
          (remaining == bind_remaining and reset > bind_reset) then
        bind, bind_remaining, bind_reset = i, remaining, reset
      end
    else
      allowed = 0
      -- A deny reports the limit that forces the longest wait.
      if retry > deny_retry then
        deny_bind, deny_remaining, deny_retry, deny_reset = i, remaining, retry, reset
      end
    end
  end
  if allowed == 0 then
    return string.format('0 %d %d %d %d', deny_bind, deny_remaining, deny_retry, deny_reset)
  end
  if not peek then
    for i = 1, #KEYS do
      commit(i, KEYS[i], now, cost, limit(i))
    end
  end
  return string.format('1 %d %d 0 %d', bind, bind_remaining, bind_reset)
end

-- One string rather than an array of integers: the client decodes it with
-- fewer allocations.
local out = {}
for peek, c in string.gmatch(ARGV[1], '(p?)(%d+)') do
  out[#out + 1] = decide(tonumber(c), peek == 'p')
end
local reply = table.concat(out, ' ')
-- Only a call that consumed something is kept: running denials again
-- counts nothing, and denials still write nothing (under maxmemory, say).
if once then
  for i = 1, #out do
    if string.sub(out[i], 1, 1) == '1' then
      redis.call('SET', once, reply, 'PX', once_ttl)
      break
    end
  end
end
return reply
