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
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- limit returns the rate, period, burst and time unit (µs) of limit i, the
-- period in that unit.
local function limit(i)
  local a = 4 * i - 2
  return tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
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
return table.concat(out, ' ')
