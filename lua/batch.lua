-- The requests of plain costs of one or more keys of a limiter with one
-- limit: the driver's commonest call under load, decided without its
-- kinds, limit arguments and layers of calls. The limit's rate,
-- period, burst and unit are written into the script as RATE, PERIOD,
-- BURST and UNIT (see Batch). KEYS holds one state per key; ARGV[1] the
-- costs as the driver takes them (a group per key, separated by commas,
-- each group's costs separated by spaces, digits only). The answer, and a
-- failed key's "E<error>", are the driver's.
--
-- Exactly once as in the driver: a deciding call names one key more,
-- last, and passes as ARGV[2] how long (ms) to keep its reply there,
-- negated when the client may have sent the call before; only a call
-- that consumed something keeps it.
local once, once_ttl = nil, nil
local nkeys = #KEYS
if ARGV[2] then
  once = KEYS[nkeys]
  nkeys = nkeys - 1
  local kept
  kept, once_ttl = kept_reply(once, ARGV[2])
  if kept then
    return kept
  end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local format = string.format
local consumed = false
local out = {}
local n = 0 -- the key being decided
local groups = string.gmatch(ARGV[1], '[^,]+')

-- decide answers one request of key, committing it when it passes.
local function decide(key, cost)
  local ok, remaining, retry, reset = check(1, key, now, cost, RATE, PERIOD, BURST, UNIT, 0)
  if not ok then
    return format('0 1 %d %d %d', remaining, retry, reset)
  end
  commit(1, key, now, cost, RATE, PERIOD, BURST, UNIT)
  consumed = true
  return format('1 1 %d 0 %d', remaining, reset)
end

-- run decides the keys from the one after n on, one group each. A key
-- whose decision raises an error leaves run; the loop below records the
-- error and calls run again for the keys after it: one pcall per call
-- rather than one per key.
local function run()
  for g in groups do
    n = n + 1
    local key = KEYS[n]
    local cost = tonumber(g)
    if cost then
      out[n] = decide(key, cost) -- one request, most groups
    else
      local answers = {}
      for c in string.gmatch(g, '%d+') do
        answers[#answers + 1] = decide(key, tonumber(c))
      end
      out[n] = table.concat(answers, ' ')
    end
  end
end

while true do
  local ok, err = pcall(run)
  if ok then
    break
  end
  err = type(err) == 'table' and err.err or tostring(err)
  if nkeys == 1 then
    return redis.error_reply(err)
  end
  out[n] = 'E' .. string.gsub(err, ',', ';')
end
local reply = table.concat(out, ',')
if once and consumed then
  redis.call('SET', once, reply, 'PX', once_ttl)
end
return reply
