-- The end of every one-request script (see one_start.lua): an admitting
-- call whose client keeps its reply under a key of its own (the sliding
-- log's) writes it there, then answers reply.
if once then
  local kept = redis.pcall('SET', once, reply, 'PX', once_ttl)
  if type(kept) == 'table' and kept.err then
    return kept
  end
end
return reply
