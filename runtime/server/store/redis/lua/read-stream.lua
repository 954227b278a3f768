--[[
  ARGV[5] endpoint, ARGV[6] job. Returns {job, chunk JSON...} and marks the chunks read. The job
  is as it was before this read (its read count included); when its output is its stream
  (ochunk) no chunk follows it: the caller cuts them from the output.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): ch:*, job:*
]]
local j = job(ARGV[6])
if not live(j, ARGV[5]) then return nil end
local read = tonumber(j.read)
local chunks = {}
if tonumber(j.chunks) > read then
  if j.ochunk == '1' then redis.call('HSET', jk(j.id), 'read', j.chunks)
  else chunks = redis.call('LRANGE', P .. 'ch:' .. j.id, read, -1) end
end
if #chunks > 0 then redis.call('HSET', jk(j.id), 'read', n(read + #chunks)) end
table.insert(chunks, 1, reply(j))
return chunks
