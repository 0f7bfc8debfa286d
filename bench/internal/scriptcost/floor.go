package scriptcost

// scriptFloor is the least a script that keeps a state per key on Redis's
// clock does for one request: read the clock, read the state, write it
// back with an expiry, answer. It decides nothing: its cost is what any
// such script pays before its arithmetic, its answer and its exactly-once
// record.
const scriptFloor = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], string.format('%d:%d', now + 1000000, 1), 'PX', 1000)
return '1 1 999 0 1000'
`

// batchFloor is scriptFloor for a call of several keys, as batching sends
// them: the clock read once, each key's state read and written back, and
// the call's reply kept under its last key, as redlimit's batch script
// keeps it so that a call sent again counts once.
const batchFloor = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {}
local n = #KEYS - 1
for i = 1, n do
  redis.call('GET', KEYS[i])
  redis.call('SET', KEYS[i], string.format('%d:%d', now + 1000000, i), 'PX', 1000)
  out[i] = '1 1 999 0 1000'
end
local reply = table.concat(out, ',')
redis.call('SET', KEYS[#KEYS], reply, 'PX', 2200)
return reply
`

// logFloor is the least a log that keeps each admission, as the sliding
// window log does, does for one request: read the clock, drop the entries
// that left the window, count those left, add this one, set the key's
// expiry. It decides nothing, and keeps no record of the call.
const logFloor = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 100000)
redis.call('ZCARD', KEYS[1])
redis.call('ZADD', KEYS[1], now, string.format('%016d:1', now))
redis.call('PEXPIRE', KEYS[1], 100)
return '1 1 999 0 1000'
`
