-- Decides the requests of one or more keys of one limiter in one call.
-- ARGV[1] holds a group per key, separated by commas, and each group the
-- costs of that key's requests separated by spaces, decided in that order,
-- all at one instant: the requests of many keys cost one script call, and
-- each gets exactly the answer it would have got alone. KEYS holds, group
-- after group, one key per limit; ARGV, after the costs, each limit's
-- rate, period, burst and time unit (µs; the period is in that unit).
-- A cost written "p<cost>" is a peek: the answer such a request would get,
-- with nothing consumed. One written "d<max µs>:<cost>" is a reservation:
-- a request that the limits admit within that delay is admitted, and its
-- answer's retry-after, on an allowed request always 0 otherwise, is the
-- delay after which it may proceed (the longest of its limits' waits).
-- check takes the delay as a last argument and returns the wait as a fifth
-- value; the algorithms that cannot delay ignore the one and omit the other.
-- One written "r<cost>/<age µs>" is a refund: every limit gives back up to
-- cost units consumed at least age µs ago (see each algorithm's refund),
-- and the answer is that of a peek of cost 0 after it. One written
-- "c<cost>" is a charge, never refused: every limit takes cost units, or
-- all it has left when that is less (the remaining check reports for cost
-- 0), and the answer is that of a peek of cost 0 after it. One written
-- "o<cost>" is a charge that may overdraw: a limit whose algorithm defines
-- overdraw (nil for those that cannot) takes cost by it, past what it has
-- left, so that a charge far above the quota holds the next request back
-- a whole period; the others take as "c" does.
-- For each request it runs check for every limit, then commit for every
-- limit only when all of them allow it, so a request consumes from all
-- limits or none. Time comes from the Redis server so every application
-- instance shares one clock; it is kept in integer microseconds, exact in a
-- Lua number.

-- A call may reach Redis twice: a client sends a command again when its
-- reply was lost (a broken connection, a timeout), after the first may have
-- run. So a call that decides (not a peek) passes one key more, last,
-- unique to the call and in the same slot, and one argument more, last:
-- how long (ms) to keep its reply there, negated when the client may have
-- sent the call before. Only then can the key be set: a call that finds it
-- set has run before, and returns the first run's reply, deciding nothing.
-- (A call of one request on a limiter of one limit keeps its record after
-- its key's state instead; see one_start.lua.)
local per = math.floor((#ARGV - 1) / 4)
local once, once_ttl
if #ARGV - 1 > 4 * per then
  once = KEYS[#KEYS]
  local kept, again
  kept, once_ttl, again = kept_reply(once, ARGV[#ARGV])
  if kept then
    return kept
  end
  if again then
    -- A charge goes under the id of a call that may have run: a
    -- one-request call (see one_start.lua) keeps its record after its state.
    local id = string.match(once, ':once:(.+)$')
    kept = id and recorded(KEYS[1], id)
    if kept then
      return kept
    end
  end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local groups = {}
for g in string.gmatch(ARGV[1], '[^,]+') do
  groups[#groups + 1] = g
end

-- The rate, period, burst and unit of each limit, read once per call.
local rates, periods, bursts, units = {}, {}, {}, {}
for i = 1, per do
  local a = 4 * i - 2
  rates[i], periods[i], bursts[i], units[i] =
    tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
end
local rate1, period1, burst1, unit1 = rates[1], periods[1], bursts[1], units[1]
local consumed = false

-- decide_one is decide for a limiter of one limit: no binding limit to
-- choose, and fewer lookups per decision (most calls of a busy store).
local function decide_one(base, cost, peek, maxd)
  local key = KEYS[base + 1]
  local ok, remaining, retry, reset, wait = check(1, key, now, cost, rate1, period1, burst1, unit1, maxd)
  if not ok then
    return string.format('0 1 %d %d %d', remaining, retry, reset)
  end
  if not peek then
    commit(1, key, now, cost, rate1, period1, burst1, unit1)
    consumed = true
  end
  if wait and wait > 0 then
    return string.format('1 1 %d %d %d', remaining, wait, reset)
  end
  return string.format('1 1 %d 0 %d', remaining, reset)
end

-- decide returns one request's answer, for the key whose limits' keys
-- follow KEYS[base], as five integers; a peek commits nothing.
local function decide(base, cost, peek, maxd)
  if per == 1 then
    return decide_one(base, cost, peek, maxd)
  end
  local allowed = 1
  local delay = 0
  local bind, bind_remaining, bind_reset = 0, 0, 0
  local deny_bind, deny_remaining, deny_retry, deny_reset = 0, 0, -1, 0
  for i = 1, per do
    local ok, remaining, retry, reset, wait = check(i, KEYS[base + i], now, cost, rates[i], periods[i], bursts[i], units[i], maxd)
    if ok then
      if wait and wait > delay then
        delay = wait
      end
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
    for i = 1, per do
      commit(i, KEYS[base + i], now, cost, rates[i], periods[i], bursts[i], units[i])
    end
    consumed = true
  end
  return string.format('1 %d %d %d %d', bind, bind_remaining, delay, bind_reset)
end

-- announce tells every application instance that the key whose state key
-- is given has room again, so that each forgets the denials it cached for
-- it: "<prefix>:{<tag>}:..." publishes the SHA-1 of the tag, never the key,
-- on "<prefix>:denials" (the prefix has no braces, the tag is escaped).
local function announce(key)
  local prefix, tag = string.match(key, '^([^{}]*):{([^{}]*)}')
  if prefix then
    redis.call('PUBLISH', prefix .. ':denials', redis.sha1hex(tag))
  end
end

-- give_back refunds cost units consumed at least age µs ago under every limit
-- of the key whose limits' keys follow KEYS[base], and answers as a peek of
-- cost 0 would after it. A refund that changed something is kept as a
-- consuming call is, so that a call sent again does not refund twice.
local function give_back(base, cost, age)
  local gave = false
  for i = 1, per do
    if refund(i, KEYS[base + i], now, cost, now - age, rates[i], periods[i], bursts[i], units[i]) then
      gave = true
    end
  end
  if gave then
    consumed = true
    announce(KEYS[base + 1])
  end
  return decide(base, 0, true, 0)
end

-- take charges cost units under every limit of the key whose limits' keys
-- follow KEYS[base], each limit taking what it has left when that is less,
-- or, with over, overdrawing when its algorithm can; it answers as a peek
-- of cost 0 would after it. A charge that took something is kept as a
-- consuming call is, so that a call sent again does not charge twice.
local function take(base, cost, over)
  for i = 1, per do
    local key = KEYS[base + i]
    local ok, left = check(i, key, now, 0, rates[i], periods[i], bursts[i], units[i], 0)
    if over and overdraw then
      if overdraw(i, key, now, cost, rates[i], periods[i], bursts[i], units[i]) then
        consumed = true
      end
    elseif ok and math.min(cost, left) > 0 then
      commit(i, key, now, math.min(cost, left), rates[i], periods[i], bursts[i], units[i])
      consumed = true
    end
  end
  return decide(base, 0, true, 0)
end

-- decide_group answers one key's requests, joined by spaces.
local function decide_group(n)
  -- Most groups are one request of a plain cost: no pattern to match.
  local cost = tonumber(groups[n])
  if cost then
    return decide((n - 1) * per, cost, false, 0)
  end
  local out = {}
  for kind, a, b in string.gmatch(groups[n], '(%a?)(%d+)[:/]?(%d*)') do
    if kind == 'd' then
      -- A reservation: "d<max µs>:<cost>".
      out[#out + 1] = decide((n - 1) * per, tonumber(b), false, tonumber(a))
    elseif kind == 'c' or kind == 'o' then
      -- A charge: "c<cost>", or "o<cost>" that may overdraw.
      out[#out + 1] = take((n - 1) * per, tonumber(a), kind == 'o')
    elseif kind == 'r' then
      -- A refund: "r<cost>/<age µs>".
      out[#out + 1] = give_back((n - 1) * per, tonumber(a), tonumber(b) or 0)
    else
      out[#out + 1] = decide((n - 1) * per, tonumber(a), kind == 'p', 0)
    end
  end
  return table.concat(out, ' ')
end

-- One string rather than an array of integers: the client decodes it with
-- fewer allocations. A key whose group failed (a write refused when Redis
-- is out of memory, say) answers "E" and the error, and the other keys
-- keep their answers.
local out = {}
for n = 1, #groups do
  local ok, res = pcall(decide_group, n)
  if not ok then
    if #groups == 1 then
      return redis.error_reply(type(res) == 'table' and res.err or tostring(res))
    end
    res = 'E' .. string.gsub(type(res) == 'table' and res.err or tostring(res), ',', ';')
  end
  out[n] = res
end
local reply = table.concat(out, ',')
-- Only a call that consumed, charged or refunded something is kept: running denials
-- again counts nothing, and denials still write nothing (under maxmemory,
-- say).
if once and consumed then
  redis.call('SET', once, reply, 'PX', once_ttl)
end
return reply
