--[[
  ARGV[5] worker, ARGV[6] job, ARGV[7] JSON array of chunk JSON texts.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): ch:*, job:*
]]
local j = job(ARGV[6])
if not live(j) or j.status ~= 'IN_PROGRESS' or j.worker ~= ARGV[5] then return 0 end
local chunks = cjson.decode(ARGV[7])
if #chunks > 0 then
  rpush(P .. 'ch:' .. j.id, chunks)
  redis.call('HINCRBY', jk(j.id), 'chunks', #chunks)
end
pub('job:' .. j.id)
return 1
