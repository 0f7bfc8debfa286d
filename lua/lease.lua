-- Leases of a limit (see Lease): units of a key's limit granted to one
-- holder, which spends them in memory, and given back once by the
-- holder's lease id when unspent. For the fixed window and the sliding
-- window counter a lease is units of the current window, for the buckets
-- tokens. Before this: units.lua, the algorithm's file, the limit as RATE,
-- PERIOD, BURST and UNIT (UNIT is 1 for the windows), and KIND ('fixed',
-- 'sliding' or 'bucket').
--
-- KEYS[1] is the limit's state, KEYS[2] the key's lease records (a hash:
-- "w", the start of the window they belong to, 0 for a bucket, and per
-- lease id "<granted> <window start> <end µs> <returned 0|1>|<reply>"),
-- KEYS[3] its holders (a sorted set of the stores holding a lease, each
-- scored by the end of its latest lease, µs: a store is the part of a
-- lease id before its last '.', as redisstore's ids "L<store>.<count>"
-- are, or the whole id). All three
-- share the key's hash tag. ARGV[1] is the operation, ARGV[2] the lease
-- id.
--
-- "g", grant: ARGV[3] the cost of a request it decides with the grant (0,
-- as redisstore's grants send: none), ARGV[4] the units wanted, ARGV[5] the lease's
-- longest life (µs), ARGV[6] how long (ms) to keep the records past the
-- lease's window (a bucket's: the lease's life). It decides the request as
-- the algorithm's script does, then grants up to the units wanted, at most
-- what is left after the request divided by the other holders plus one (so
-- a holder leaves the others their part, and a store renewing its leases
-- counts once however many it spent), for the rest of the lease's life
-- and never past the window's end. Every unit granted is counted in the
-- state at once: what the holders spend never pushes the count past the
-- limit (a bucket's tokens are taken when granted). It answers
-- "<allowed> 1 <remaining> <retry µs> <reset µs> <granted> <lease µs>",
-- remaining what is left after the request and the grant. A grant that
-- consumed something keeps its reply under its id: a grant sent again
-- answers from it and grants nothing more. A new window forgets the
-- previous one's records, and a key's records are forgotten when they pass
-- MAX_RECORDS (a grant sent again then is decided again, and a return
-- gives nothing back: both on the strict side).
--
-- "r", return: ARGV[3] the units unspent. It gives back at most what the
-- lease was granted, once per lease id, and only while the lease's window
-- lasts; when it is its store's latest lease, the store stops being a
-- holder. It answers the units given back,
-- and when it gave some, announces the key on "<prefix>:denials" as a
-- refund does, so that every instance forgets the key's cached denials.
local MAX_RECORDS = 1024
local key, records, holders, op, id = KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- window returns, after check, the start and the end (µs) of the window
-- that check found; for a bucket, 0 and the end of a lease granted now.
local function window(life)
  if KIND == 'fixed' then
    return ends[1] - PERIOD, ends[1]
  elseif KIND == 'sliding' then
    return starts[1], starts[1] + PERIOD
  end
  return 0, now + (life or 0)
end

-- holderOf returns the store that holds lease.
local function holderOf(lease)
  return string.match(lease, '^(.*)%.[^.]*$') or lease
end

if op == 'g' then
  local kept = redis.call('HGET', records, id)
  if kept then
    return string.sub(kept, string.find(kept, '|', 1, true) + 1)
  end
  local cost, want, life, keep = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
  local ok, remaining, retry, reset = check(1, key, now, cost, RATE, PERIOD, BURST, UNIT)
  if not ok then
    return string.format('0 1 %d %d %d 0 0', remaining, retry, reset)
  end
  local start, wend = window(life)
  if tonumber(redis.call('HGET', records, 'w')) ~= start or redis.call('HLEN', records) > MAX_RECORDS then
    redis.call('DEL', records, holders)
    redis.call('HSET', records, 'w', string.format('%d', start))
  end
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
  local holder = holderOf(id)
  local others = redis.call('ZCARD', holders)
  if redis.call('ZSCORE', holders, holder) then
    others = others - 1
  end
  local fair = math.floor(remaining / (others + 1))
  local lasts = math.min(life, wend - now)
  local grant = math.max(math.min(want, fair), 0)
  if lasts <= 0 then
    grant = 0
  end
  local reply = string.format('1 1 %d 0 %d %d %d', remaining - grant, reset, grant, grant > 0 and lasts or 0)
  if cost + grant == 0 then
    return reply
  end
  commit(1, key, now, cost + grant, RATE, PERIOD, BURST, UNIT)
  local px = math.max(math.ceil((wend - now) / 1000), 1) + keep
  local lend = grant > 0 and now + lasts or 0
  redis.call('HSET', records, id, string.format('%d %d %d 0|%s', grant, start, lend, reply))
  redis.call('PEXPIRE', records, px)
  if grant > 0 then
    redis.call('ZADD', holders, 'GT', lend, holder)
    redis.call('PEXPIRE', holders, px)
  end
  return reply
end

if op == 'r' then
  local rec = redis.call('HGET', records, id)
  if not rec then
    return '0'
  end
  local granted, start, lend, done, p = string.match(rec, '^(%d+) (%d+) (%d+) (%d)()')
  if not p or done ~= '0' then
    return '0'
  end
  redis.call('HSET', records, id, granted .. ' ' .. start .. ' ' .. lend .. ' 1' .. string.sub(rec, p))
  local holder = holderOf(id)
  if tonumber(redis.call('ZSCORE', holders, holder) or -1) == tonumber(lend) then
    redis.call('ZREM', holders, holder)
  end
  local n = math.min(tonumber(ARGV[3]), tonumber(granted))
  check(1, key, now, 0, RATE, PERIOD, BURST, UNIT)
  if n <= 0 or window() ~= tonumber(start) then
    return '0'
  end
  if not refund(1, key, now, n, now, RATE, PERIOD, BURST, UNIT) then
    return '0'
  end
  local prefix, tag = string.match(key, '^([^{}]*):{([^{}]*)}')
  if prefix then
    redis.call('PUBLISH', prefix .. ':denials', redis.sha1hex(tag))
  end
  return string.format('%d', n)
end
return redis.error_reply('ERR lease: unknown operation')
