--[[
  ARGV[5] endpoint, ARGV[6] job. How many live queued jobs of the endpoint are taken before it, or
  -1 unless it is queued: its rank in the queue less the expired ones ahead the sweep has not
  removed yet (found through the expiry index, so as many as expired since the last sweep).

  Keys, under the prefix ARGV[1] (none is passed in KEYS): job:*, q:*, st:*
]]
local j = job(ARGV[6])
if not live(j, ARGV[5]) or j.status ~= 'IN_QUEUE' then return -1 end
local q = P .. 'q:' .. j.ep
local rank = redis.call('ZRANK', q, j.id)
if not rank then return -1 end
local seq = tonumber(redis.call('ZSCORE', q, j.id))
for _, id in ipairs(redis.call('ZRANGEBYSCORE', st(j.ep, 'IN_QUEUE'), '-inf', now)) do
  local s = redis.call('ZSCORE', q, id)
  if s and tonumber(s) < seq then rank = rank - 1 end
end
return rank
