--[[
  ARGV[5] endpoint, ARGV[6] job. Returns the job, 'not-found' or 'conflict:<status>'.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): ch:*, ctr:*, exp, job:*, ls:*, q:*, seq, st:*, stops:*
]]
local j = job(ARGV[6])
if not live(j, ARGV[5]) then return 'not-found' end
if j.status ~= 'FAILED' and j.status ~= 'TIMED_OUT' then return 'conflict:' .. j.status end
redis.call('DEL', P .. 'ch:' .. j.id)
-- A stop owed to the earlier run (its timeout) must not cancel the new one.
if j.worker and j.worker ~= '' then redis.call('SREM', P .. 'stops:' .. j.worker, j.id) end
drop(j, {'started', 'completed', 'deadline', 'worker', 'output', 'error', 'progress', 'ochunk'})
local seq = n(redis.call('INCR', P .. 'seq'))
setStatus(j, 'IN_QUEUE', now + tonumber(j.ttl), {'seq', seq, 'queued', n(now), 'losses', '0', 'retries', n(tonumber(j.retries) + 1), 'chunks', '0', 'read', '0'})
redis.call('ZADD', P .. 'q:' .. j.ep, seq, j.id)
redis.call('HINCRBY', P .. 'ctr:' .. j.ep, 'retried', 1)
pub('queue:' .. j.ep); pub('job:' .. j.id)
return reply(j)
