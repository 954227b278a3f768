--[[
  ARGV[5] an Idempotency-Key's scope (idempotencyScope), ARGV[6] endpoint. While the key is kept:
  {job id, body hash, expiry, the job or false once it is gone}; nil when it is free.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): idem:*, job:*
]]
local prior = redis.call('HMGET', P .. 'idem:' .. ARGV[5], 'job', 'ih', 'exp')
if not prior[1] then return nil end
local j = job(prior[1])
local alive = live(j, ARGV[6])
-- A key written before keys had an expiry of their own is kept as long as its job.
if prior[3] then
  if tonumber(prior[3]) <= now then return nil end
elseif not alive then return nil end
return {prior[1], prior[2], prior[3] or j.expires, alive and reply(j) or false}
