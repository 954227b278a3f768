import { BATCHED_SCRIPTS } from "./redis-lua-batched.ts";

/** The job scripts (run inside PRELUDE ... EPILOGUE of redis-lua-prelude.ts). */
export const JOB_SCRIPTS = {
  ...BATCHED_SCRIPTS,

  /**
   * ARGV5 an Idempotency-Key's scope (idempotencyScope), ARGV6 endpoint. While the key is kept:
   * {job id, body hash, expiry, the job or false once it is gone}; nil when it is free.
   */
  idemFind: `
local prior = redis.call('HMGET', P .. 'idem:' .. ARGV[5], 'job', 'ih', 'exp')
if not prior[1] then return nil end
local j = job(prior[1])
local alive = live(j, ARGV[6])
-- A key written before keys had an expiry of their own is kept as long as its job.
if prior[3] then
  if tonumber(prior[3]) <= now then return nil end
elseif not alive then return nil end
return {prior[1], prior[2], prior[3] or j.expires, alive and reply(j) or false}`,

  /** ARGV5 worker, ARGV6.. jobs it was given but never received: queued again in their place, no loss counted. */
  returnJobs: `
local w = ARGV[5]
for i = 6, #ARGV do
  local j = job(ARGV[i])
  if j ~= nil and j.status == 'IN_PROGRESS' and j.worker == w then
    unrun(j)
    requeue(j)
  end
end
return 0`,

  /** ARGV5 worker, ARGV6 job, ARGV7 progress JSON. */
  progress: `
local j = job(ARGV[6])
if not live(j) or j.status ~= 'IN_PROGRESS' or j.worker ~= ARGV[5] then return 0 end
redis.call('HSET', jk(j.id), 'progress', ARGV[7])
pub('job:' .. j.id)
return 1`,

  /** ARGV5 worker, ARGV6 job, ARGV7 JSON array of chunk JSON texts. */
  append: `
local j = job(ARGV[6])
if not live(j) or j.status ~= 'IN_PROGRESS' or j.worker ~= ARGV[5] then return 0 end
local chunks = cjson.decode(ARGV[7])
if #chunks > 0 then
  rpush(P .. 'ch:' .. j.id, chunks)
  redis.call('HINCRBY', jk(j.id), 'chunks', #chunks)
end
pub('job:' .. j.id)
return 1`,

  /**
   * ARGV5 endpoint, ARGV6 job. Returns {job, chunk JSON...} and marks the chunks read. The job
   * is as it was before this read (its read count included); when its output is its stream
   * (ochunk) no chunk follows it: the caller cuts them from the output.
   */
  readStream: `
local j = job(ARGV[6])
if not live(j, ARGV[5]) then return nil end
local read = tonumber(j.read)
local chunks = {}
if tonumber(j.chunks) > read then
  if j.ochunk == '1' then redis.call('HSET', jk(j.id), 'read', j.chunks)
  else chunks = redis.call('LRANGE', P .. 'ch:' .. j.id, read, -1) end
end
if #chunks > 0 then redis.call('HSET', jk(j.id), 'read', n(read + #chunks)) end
table.insert(chunks, 1, reply(j))
return chunks`,

  /** ARGV5 endpoint, ARGV6 job, ARGV7 first chunk index. Returns {job, chunk JSON...} (none when ochunk, as readStream); marks nothing. */
  readChunks: `
local j = job(ARGV[6])
if not live(j, ARGV[5]) then return nil end
local chunks = {}
if j.ochunk ~= '1' then chunks = redis.call('LRANGE', P .. 'ch:' .. j.id, tonumber(ARGV[7]), -1) end
table.insert(chunks, 1, reply(j))
return chunks`,

  /** ARGV5 endpoint, ARGV6 job. Returns {1 if this call cancelled it, else 0; job}, or nil. */
  cancel: `
local j = job(ARGV[6])
if not live(j, ARGV[5]) then return nil end
if j.status ~= 'IN_QUEUE' and j.status ~= 'IN_PROGRESS' then return {0, reply(j)} end
if j.status == 'IN_QUEUE' then redis.call('ZREM', P .. 'q:' .. j.ep, j.id) else unrun(j); stop(j) end
ended(j, 'CANCELLED')
return {1, reply(j)}`,

  /** ARGV5 endpoint, ARGV6 job. Returns the job, 'not-found' or 'conflict:<status>'. */
  retry: `
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
return reply(j)`,

  /** ARGV5 endpoint. */
  purge: `
local removed = 0
for _, id in ipairs(redis.call('ZRANGE', P .. 'q:' .. ARGV[5], 0, -1)) do
  local j = job(id)
  if j ~= nil and j.status == 'IN_QUEUE' then
    if live(j) then removed = removed + 1 end
    remove(j)
    pub('job:' .. id)
  end
end
redis.call('DEL', P .. 'q:' .. ARGV[5])
return removed`,

  /**
   * ARGV5 endpoint, ARGV6 error JSON, ARGV7 limit. Ends up to `limit` of its live queued jobs
   * FAILED with that error, first in queue order; answers them (ended). One call stays short
   * whatever the queue's length: the caller repeats it while a whole batch failed.
   */
  failQueued: `
local q = P .. 'q:' .. ARGV[5]
local limit = tonumber(ARGV[7])
local failed, skipped = {}, 0
while #failed < limit do
  local ids = redis.call('ZRANGE', q, skipped, skipped + limit - #failed - 1)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    local j = job(id)
    if live(j) and j.status == 'IN_QUEUE' then
      redis.call('ZREM', q, j.id)
      ended(j, 'FAILED', {'error', ARGV[6]})
      failed[#failed + 1] = reply(j, false, true)
    else
      skipped = skipped + 1 -- expired: the sweep's to remove
    end
  end
end
return failed`,

  /** ARGV5 endpoint, ARGV6 job, ARGV7 new expiry. */
  setExpiry: `
local j = job(ARGV[6])
if not live(j, ARGV[5]) then return nil end
local e = tonumber(ARGV[7])
redis.call('HSET', jk(j.id), 'expires', n(e))
redis.call('ZADD', P .. 'exp', e, j.id)
redis.call('ZADD', st(j.ep, j.status), e, j.id)
if j.low == '1' and j.status == 'IN_QUEUE' then redis.call('ZADD', st(j.ep, 'LOW'), e, j.id) end
j.expires = n(e)
return reply(j)`,

  /**
   * ARGV5 endpoint, ARGV6 job. How many live queued jobs of the endpoint are taken before it, or
   * -1 unless it is queued: its rank in the queue less the expired ones ahead the sweep has not
   * removed yet (found through the expiry index, so as many as expired since the last sweep).
   */
  position: `
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
return rank`,
};
