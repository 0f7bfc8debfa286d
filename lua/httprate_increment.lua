-- Counter for go-chi/httprate, plain increment. KEYS[1] is one client's
-- counter of one window; ARGV[1] is the amount to add (at least 1) and
-- ARGV[2] the counter's lifetime in milliseconds, counted on Redis's clock
-- from this increment. The addition and the expiry are one step, so no
-- counter is ever left without an expiry. Returns the new count.
-- A call may reach Redis twice (a client sends it again when its reply was
-- lost). So a call may pass a key more, KEYS[2], unique to the call and
-- in the counter's slot, and ARGV[3], how long (ms) to keep its reply
-- there: a call that finds that key set has run before and returns the
-- first run's reply, counting nothing.
if KEYS[2] then
  local kept = redis.call('GET', KEYS[2])
  if kept then
    return tonumber(kept)
  end
end
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if KEYS[2] then
  redis.call('SET', KEYS[2], n, 'PX', ARGV[3])
end
return n
