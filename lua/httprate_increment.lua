-- Counter for go-chi/httprate, plain increment. KEYS[1] is one client's
-- counter of one window; ARGV[1] is the amount to add (at least 1) and
-- ARGV[2] the counter's lifetime in milliseconds, counted on Redis's clock
-- from this increment. The addition and the expiry are one step, so no
-- counter is ever left without an expiry. Returns the new count.
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return n
