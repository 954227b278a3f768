--[[
  ARGV[5] worker.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): stops:*
]]
local k = P .. 'stops:' .. ARGV[5]
local ids = redis.call('SMEMBERS', k)
redis.call('DEL', k)
return ids
