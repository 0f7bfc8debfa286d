-- Time units. A limit whose numbers would pass 2^53 in microseconds, the
-- largest integer a Lua number holds exactly, counts time in a coarser unit
-- that divides its period (the Go side picks it and passes it as the unit
-- argument, in µs; 1 for most limits). in_units reads the clock in it;
-- to_us turns d units from now into the µs until the unit that starts then,
-- so that waiting it is enough and waiting one µs less is not.
local function in_units(now_us, unit)
  return math.floor(now_us / unit)
end

local function to_us(d, now_us, now, unit)
  if unit == 1 or d <= 0 then
    return d
  end
  return (now + d) * unit - now_us
end

-- ttl is the PX, in whole ms, of a key whose state means nothing from unit
-- time t on.
local function ttl(t, now_us, unit)
  return math.max(math.ceil((t * unit - now_us) / 1000), 1)
end

-- A one-request call (see one_start.lua) keeps the record of its call after
-- the state it commits: "<state>|<call id> <reply>". suffix is that record
-- while it commits, '' otherwise. The algorithms match a state as read,
-- record and all, with a pattern that ends in a position capture p, and
-- whole(v, p) tells whether the match took all of it up to the record: no
-- copy of the state without it.
local suffix = ''

local function whole(v, p)
  return p and (p > #v or string.byte(v, p) == 124) -- '|'
end

-- recorded returns the reply that a one-request call of this id left after
-- the state of key, or nil when the state holds no record of it (a state
-- of another type reads as none). one_start.lua reads it so too, written
-- out.
local function recorded(key, id)
  local v = redis.pcall('GET', key)
  local at = type(v) == 'string' and string.find(v, '|' .. id .. ' ', 1, true)
  if at then
    return string.sub(v, at + #id + 2)
  end
end

-- kept_reply reads a call's reply-lifetime argument (ms), negative when
-- the client may have sent the call before: it returns then the reply the
-- call's first run kept under the key once (false when there is none),
-- the lifetime, and true. A new call can have no kept reply: no GET.
local function kept_reply(once, ttl_arg)
  local ttl = tonumber(ttl_arg)
  if ttl < 0 then
    return redis.call('GET', once), -ttl, true
  end
  return false, ttl, false
end
