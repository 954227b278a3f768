--[[
  ARGV[5] name, ARGV[6] holder, ARGV[7] ttl.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): lease:*
]]
local k = P .. 'lease:' .. ARGV[5]
local cur = redis.call('GET', k)
if cur and cur ~= ARGV[6] then return 0 end
redis.call('SET', k, ARGV[6], 'PX', ARGV[7])
return 1
