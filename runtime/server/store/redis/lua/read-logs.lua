--[[
  ARGV[5] endpoint, ARGV[6] job, ARGV[7] first line. Returns {'1' when cut else '0', line JSON...},
  or nil.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): job:*, log:*, logm:*
]]
local v = redis.call('HMGET', jk(ARGV[6]), 'ep', 'expires')
if v[1] ~= ARGV[5] or tonumber(v[2]) <= now then return nil end
local lines = redis.call('LRANGE', P .. 'log:' .. ARGV[6], tonumber(ARGV[7]), -1)
table.insert(lines, 1, redis.call('HGET', P .. 'logm:' .. ARGV[6], 'cut') or '0')
return lines
