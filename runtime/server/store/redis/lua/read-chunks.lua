--[[
  ARGV[5] endpoint, ARGV[6] job, ARGV[7] first chunk index. Returns {job, chunk JSON...} (none when ochunk, as readStream); marks nothing.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): ch:*, job:*
]]
local j = job(ARGV[6])
if not live(j, ARGV[5]) then return nil end
local chunks = {}
if j.ochunk ~= '1' then chunks = redis.call('LRANGE', P .. 'ch:' .. j.id, tonumber(ARGV[7]), -1) end
table.insert(chunks, 1, reply(j))
return chunks
