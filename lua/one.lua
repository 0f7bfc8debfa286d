-- One request of a plain cost for one key of a limiter with one limit: the
-- most common call, decided without the driver's groups, kinds and loops,
-- which cost Redis more than the decision itself. The limit's rate, period,
-- burst and unit (as the driver takes them) are written into the script as
-- RATE, PERIOD, BURST and UNIT (see OneRequest). KEYS[1] is the state and
-- ARGV[1] the cost; one_start.lua, before this, reads the exactly-once
-- arguments and the clock, and one_end.lua, after it, keeps the reply. The
-- answer is the driver's.
--
-- This is the script of the sliding window log and of limits counted in a
-- coarse unit; the other algorithms' limits of unit 1 have scripts written
-- out in full (one_*.lua), which define no function on every call.
--
-- check and commit raise an error on a key of another type or a refused
-- write; pcall calls each of them directly, with no closure to make on
-- every call, and the error answers as the driver's. res is check's
-- verdict, then commit's error when it raised one.
local reply
local ok, res, remaining, retry, reset = pcall(check, 1, key, now, cost, RATE, PERIOD, BURST, UNIT, 0)
if ok and res then
  reply = string.format('1 1 %d 0 %d', remaining, reset)
  if id then
    suffix = '|' .. id .. ' ' .. reply
  end
  ok, res = pcall(commit, 1, key, now, cost, RATE, PERIOD, BURST, UNIT)
end
if not ok then
  return redis.error_reply(type(res) == 'table' and res.err or tostring(res))
end
if not reply then
  return string.format('0 1 %d %d %d', remaining, retry, reset)
end
