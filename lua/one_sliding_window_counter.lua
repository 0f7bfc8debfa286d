-- The sliding window counter's one-request script for a limit of unit 1,
-- between one_start.lua and one_end.lua: check and commit of
-- sliding_window_counter.lua for one request of a plain cost, step for
-- step, written out as statements so that a call defines no function (see
-- one_fixed_window.lua). It answers, writes and keeps records as the
-- driver does: TestOneScriptMatchesDriver and
-- TestOneAndBatchMatchDriverOnOddStates prove it.
local ws, cur, prev = now, 0, 0
local v = redis.pcall('GET', key)
if type(v) == 'table' then
  return v -- a key of another type: the driver's error
end
if v then
  local a, b, c, p = string.match(v, '^(%d+):(%d+):(%d+)()')
  if p and (p > #v or string.byte(v, p) == 124) then
    ws, cur, prev = tonumber(a), tonumber(b), tonumber(c)
    local k = math.floor((now - ws) / PERIOD)
    if k == 1 then
      prev, cur = cur, 0
    elseif k >= 2 then
      prev, cur = 0, 0
    end
    if k >= 1 then
      ws = ws + k * PERIOD
    end
    if prev == 0 and cur == 0 then
      ws = now
    elseif ws > now then
      -- A window that starts in the future was started by a clock that
      -- was ahead: it starts now, and its counts still count.
      ws = now
      local set = redis.pcall('SET', key, string.format('%d:%d:%d', ws, cur, prev),
        'PX', math.max(math.ceil(2 * PERIOD / 1000), 1))
      if type(set) == 'table' and set.err then
        return set
      end
    end
  end
end
local e = now - ws
local used = cur + math.ceil(prev * (PERIOD - e) / PERIOD)
if used + cost > RATE then
  local reset = ws + PERIOD - now
  if cur > 0 then
    reset = reset + PERIOD
  end
  -- The earliest time the weighted count leaves room for cost.
  local retry
  local room = RATE - cur - cost
  if room >= 0 then
    -- Later in this window: prev * (period - x) <= room * period.
    retry = math.ceil(PERIOD * (prev - room) / prev) - e
  else
    -- In the next window, where the current count becomes the previous one.
    room = RATE - cost
    local x = 0
    if cur > room then
      x = math.ceil(PERIOD * (cur - room) / cur)
    end
    retry = PERIOD - e + x
  end
  return string.format('0 1 %d %d %d', math.max(RATE - used, 0), retry, reset)
end
local ends = ws + 2 * PERIOD - now -- µs until both counts have left
local reply = string.format('1 1 %d 0 %d', RATE - used - cost, ends)
local record = id and '|' .. id .. ' ' .. reply or ''
local set = redis.pcall('SET', key, string.format('%d:%d:%d%s', ws, cur + cost, prev, record),
  'PX', math.max(math.ceil(ends / 1000), 1))
if type(set) == 'table' and set.err then
  return set
end
