-- The leaky bucket's one-request script for a limit of unit 1, between
-- one_start.lua and one_end.lua: check and commit of leaky_bucket.lua for
-- one request of a plain cost, no reservation, step for step, written out
-- as statements so that a call defines no function (see
-- one_fixed_window.lua). It answers, writes and keeps records as the
-- driver does: TestOneScriptMatchesDriver and
-- TestOneAndBatchMatchDriverOnOddStates prove it.
local cap, need = BURST * PERIOD, cost * PERIOD
local backlog = 0
local v = redis.pcall('GET', key)
if type(v) == 'table' then
  return v -- a key of another type: the driver's error
end
if v then
  local w, f, x, p = string.match(v, '^(%d+):(%d+):?(%d*)()')
  if not (p and (p > #v or string.byte(v, p) == 124)) then
    w = nil
  end
  w, f, x = tonumber(w), tonumber(f), tonumber(x) or 0
  local full = cap + x
  if w and w >= now then
    if w - now > math.floor(full / RATE) or (w - now) * RATE + f > full then
      -- A backlog over the capacity (and the excess reserved) was left by
      -- a clock that was ahead: the bucket is full as of now.
      w, f = now + math.floor(full / RATE), full % RATE
      local tat = w
      if f > 0 then
        tat = w + 1
      end
      local state = string.format('%d:%d', w, f)
      if x > 0 then
        state = string.format('%d:%d:%d', w, f, x)
      end
      local set = redis.pcall('SET', key, state, 'PX', math.max(math.ceil((tat - now) / 1000), 1))
      if type(set) == 'table' and set.err then
        return set
      end
    end
    backlog = (w - now) * RATE + f
  end
end
local excess = backlog - (cap - need)
if excess > 0 then
  return string.format('0 1 %d %d %d', math.max(math.floor((cap - backlog) / PERIOD), 0),
    math.ceil(excess / RATE), math.ceil(backlog / RATE))
end
-- Admitted: the backlog after stays within the capacity, so no excess.
local after = backlog + need
local drained = math.ceil(after / RATE) -- µs until the backlog is gone
local reply = string.format('1 1 %d 0 %d', math.floor((cap - after) / PERIOD), drained)
local record = id and '|' .. id .. ' ' .. reply or ''
local w = math.floor(after / RATE)
local set = redis.pcall('SET', key, string.format('%d:%d%s', now + w, after - w * RATE, record),
  'PX', math.max(math.ceil(drained / 1000), 1))
if type(set) == 'table' and set.err then
  return set
end
