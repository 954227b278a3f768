--[[
  ARGV[5] worker, ARGV[6] job, ARGV[7] progress JSON.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): job:*
]]
local j = job(ARGV[6])
if not live(j) or j.status ~= 'IN_PROGRESS' or j.worker ~= ARGV[5] then return 0 end
redis.call('HSET', jk(j.id), 'progress', ARGV[7])
pub('job:' .. j.id)
return 1
