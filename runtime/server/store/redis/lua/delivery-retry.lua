--[[
  ARGV[5] delivery id, ARGV[6] next attempt: only while the call is still owed.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): dl, dl:*
]]
local k = P .. 'dl:' .. ARGV[5]
if redis.call('EXISTS', k) == 0 then return 0 end
redis.call('HINCRBY', k, 'attempts', 1)
redis.call('ZADD', P .. 'dl', tonumber(ARGV[6]), ARGV[5])
return 1
