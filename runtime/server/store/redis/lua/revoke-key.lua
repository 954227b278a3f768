--[[
  ARGV[5] key id or name.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): keys
]]
local count = 0
local all = redis.call('HGETALL', P .. 'keys')
for i = 1, #all, 2 do
  local k = cjson.decode(all[i + 1])
  if (k.id == ARGV[5] or k.name == ARGV[5]) and k.revokedAt == nil then
    k.revokedAt = now
    redis.call('HSET', P .. 'keys', all[i], cjson.encode(k))
    count = count + 1
  end
end
if count > 0 then pub('keys') end
return count
