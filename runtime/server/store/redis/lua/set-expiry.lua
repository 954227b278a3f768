--[[
  ARGV[5] endpoint, ARGV[6] job, ARGV[7] new expiry.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): exp, job:*, st:*
]]
local j = job(ARGV[6])
if not live(j, ARGV[5]) then return nil end
local e = tonumber(ARGV[7])
redis.call('HSET', jk(j.id), 'expires', n(e))
redis.call('ZADD', P .. 'exp', e, j.id)
redis.call('ZADD', st(j.ep, j.status), e, j.id)
if j.low == '1' and j.status == 'IN_QUEUE' then redis.call('ZADD', st(j.ep, 'LOW'), e, j.id) end
j.expires = n(e)
return reply(j)
