-- The fixed window's one-request script for its limit (whose unit is
-- always 1), between one_start.lua and one_end.lua: check and commit of
-- fixed_window.lua for one request of a plain cost, step for step, written
-- out as statements so that a call defines no function (defining them is
-- a fifth of a one-request call's script time). It answers, writes and
-- keeps records as the driver does: TestOneScriptMatchesDriver and
-- TestOneAndBatchMatchDriverOnOddStates prove it.
local v = redis.pcall('GET', key)
if type(v) == 'table' then
  return v -- a key of another type: the driver's error
end
local wend, count = now + PERIOD, 0
if v then
  local e, c, p = string.match(v, '^(%d+):(%d+)()')
  e = p and (p > #v or string.byte(v, p) == 124) and tonumber(e)
  if e and e > now then
    wend, count = e, tonumber(c)
    if e > now + PERIOD then
      -- Set by a clock that was ahead: the window ends a period from now.
      wend = now + PERIOD
      local set = redis.pcall('SET', key, string.format('%d:%d', wend, count), 'PX', math.max(math.ceil((wend - now) / 1000), 1))
      if type(set) == 'table' and set.err then
        return set
      end
    end
  end
end
if count + cost > RATE then
  return string.format('0 1 %d %d %d', math.max(RATE - count, 0), wend - now, wend - now)
end
local reply = string.format('1 1 %d 0 %d', RATE - count - cost, wend - now)
local record = id and '|' .. id .. ' ' .. reply or ''
local set = redis.pcall('SET', key, string.format('%d:%d%s', wend, count + cost, record),
  'PX', math.max(math.ceil((wend - now) / 1000), 1))
if type(set) == 'table' and set.err then
  return set
end
