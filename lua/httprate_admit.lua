-- Counter for go-chi/httprate, checked increment. KEYS[1] is one client's
-- counter of the current window, KEYS[2] its counter of the window before;
-- both carry the same hash tag. ARGV: the amount (at least 1), the limit,
-- the current window's start (µs since the Unix epoch, as the application
-- named the window), the window's length (µs) and the counter's lifetime
-- (ms). The amount is added only if httprate's weighted count, taken now
-- on Redis's clock, leaves room for it: the check and the increment are
-- one step, so concurrent callers can never pass the limit together.
-- Returns the new count, or -1 when the amount was refused (nothing is
-- written then). A call may reach Redis twice (a client sends it again
-- when its reply was lost). So a call may pass a key more, KEYS[3], unique
-- to the call and in the counters' slot, and ARGV[6], how long (ms) to
-- keep its reply there: a call that finds that key set has run before and
-- returns the first run's reply, counting nothing. A refusal is not kept:
-- sent again, it is decided again.
if KEYS[3] then
  local kept = redis.call('GET', KEYS[3])
  if kept then
    return tonumber(kept)
  end
end
local amount = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local start = tonumber(ARGV[3])
local len = tonumber(ARGV[4])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- The share of the current window gone by, on Redis's clock. A window
-- named by a clock ahead of Redis's has not begun here yet (0); one
-- named by a clock behind has ended (len): the weights stay within
-- [0, 1] whatever the skew.
local e = math.min(math.max(now - start, 0), len)

local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local prev = tonumber(redis.call('GET', KEYS[2]) or '0')
if cur == nil or prev == nil then
  return redis.error_reply('httprate counter holds a non-number')
end

-- httprate's estimate: the previous window's count weighted by the part
-- of it still within one window of now, plus the current count, rounded
-- half up as httprate rounds it.
local rate = prev * (len - e) / len + cur
if math.floor(rate + 0.5) + amount > limit then
  return -1
end
local n = redis.call('INCRBY', KEYS[1], amount)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
if KEYS[3] then
  redis.call('SET', KEYS[3], n, 'PX', ARGV[6])
end
return n
