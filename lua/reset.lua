-- Deletes one key's state under every limit of a limiter (KEYS: they share
-- the key's hash tag, so one slot) and tells every application instance,
-- as a refund does (see announce in driver.lua): PUBLISH ARGV[1] ARGV[2],
-- the channel and the SHA-1 of the key's hash tag. One script, so the
-- announcement never precedes the deletion nor goes without it.
redis.call('DEL', unpack(KEYS))
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 0
