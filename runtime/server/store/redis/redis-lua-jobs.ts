/**
 * Lua for the Redis store: every state change of a job runs as one script, so it is atomic
 * across servers, and publishes its topics on the events channel. ARGV[1] is the key prefix,
 * ARGV[2] and ARGV[3] the sync and async retention, ARGV[4] now; a script's own arguments follow.
 */
export const PRELUDE = `
local P = ARGV[1]
local now = tonumber(ARGV[4])
local function n(x) return string.format('%.0f', x) end
local function jk(id) return P .. 'job:' .. id end
local function job(id)
  local h = redis.call('HGETALL', jk(id))
  if #h == 0 then return nil end
  local t = {}
  for i = 1, #h, 2 do t[h[i]] = h[i + 1] end
  return t
end
local function live(j, ep) return j ~= nil and (ep == nil or j.ep == ep) and tonumber(j.expires) > now end
local function pub(topic) redis.call('PUBLISH', P .. 'events', topic) end
local function st(ep, status) return P .. 'st:' .. ep .. ':' .. status end
local function setStatus(j, new, expires)
  redis.call('ZREM', st(j.ep, j.status), j.id)
  redis.call('ZADD', st(j.ep, new), expires, j.id)
  redis.call('HSET', jk(j.id), 'status', new, 'expires', n(expires))
  redis.call('ZADD', P .. 'exp', expires, j.id)
  j.status = new
  j.expires = n(expires)
end
local function retention(j) if j.sync == '1' then return tonumber(ARGV[2]) end return tonumber(ARGV[3]) end
local function owe(id)
  local j = job(id)
  if j.webhook and j.webhook ~= '' then
    local d = id .. ':' .. redis.call('INCR', P .. 'dlseq')
    redis.call('HSET', P .. 'dl:' .. d, 'url', j.webhook, 'job', cjson.encode(j), 'attempts', 0)
    redis.call('ZADD', P .. 'dl', now, d)
    pub('webhooks')
  end
end
local function stop(j)
  if j.worker and j.worker ~= '' then
    redis.call('SADD', P .. 'stops:' .. j.worker, j.id)
    pub('stop:' .. j.worker)
  end
end
local function unrun(j)
  redis.call('ZREM', P .. 'run', j.id)
  if j.worker and j.worker ~= '' then redis.call('SREM', P .. 'wjobs:' .. j.worker, j.id) end
end
local function remove(j)
  redis.call('DEL', jk(j.id), P .. 'ch:' .. j.id)
  redis.call('ZREM', P .. 'q:' .. j.ep, j.id)
  redis.call('ZREM', P .. 'exp', j.id)
  redis.call('ZREM', P .. 'list:' .. j.ep, j.id)
  redis.call('ZREM', st(j.ep, j.status), j.id)
  unrun(j)
end
local function ended(id, status, fields, j)
  redis.call('HSET', jk(id), 'completed', n(now), unpack(fields or {}))
  redis.call('HDEL', jk(id), 'deadline', 'progress')
  setStatus(j, status, now + retention(j))
  owe(id)
  pub('job:' .. id)
end
-- The worker-loss rule for one job: re-queued the first time, FAILED the second.
local function lose(j, w, why)
  unrun(j)
  if tonumber(j.losses) == 0 then
    redis.call('HSET', jk(j.id), 'losses', '1')
    redis.call('HDEL', jk(j.id), 'worker', 'started', 'deadline', 'progress')
    setStatus(j, 'IN_QUEUE', tonumber(j.expires))
    redis.call('ZADD', P .. 'q:' .. j.ep, j.seq, j.id)
    pub('queue:' .. j.ep); pub('job:' .. j.id)
    return 'requeued'
  end
  ended(j.id, 'FAILED', {'error', cjson.encode('worker ' .. w .. ' was lost while running the job (' .. why .. '), twice')}, j)
  return 'lost'
end
`;

export const JOB_SCRIPTS = {
  /** ARGV5: JSON object of the job's fields (strings), ARGV6: most jobs queued to accept one more, or ''. Returns job JSON, or {depth} when full. */
  enqueue: `
local f = cjson.decode(ARGV[5])
if ARGV[6] ~= '' then
  local depth = redis.call('ZCOUNT', st(f.ep, 'IN_QUEUE'), '(' .. n(now), '+inf')
  if depth > tonumber(ARGV[6]) then return {depth} end
end
if redis.call('EXISTS', jk(f.id)) == 1 then return redis.error_reply('duplicate job id ' .. f.id) end
f.seq = n(redis.call('INCR', P .. 'seq'))
f.rid = n(redis.call('INCR', P .. 'rid'))
f.status = 'IN_QUEUE'; f.created = n(now); f.queued = n(now)
f.losses = '0'; f.retries = '0'; f.chunks = '0'; f.read = '0'
local expires = now + tonumber(f.ttl)
f.expires = n(expires)
local args = {}
for k, v in pairs(f) do table.insert(args, k); table.insert(args, v) end
redis.call('HSET', jk(f.id), unpack(args))
redis.call('ZADD', P .. 'q:' .. f.ep, f.seq, f.id)
redis.call('ZADD', P .. 'exp', expires, f.id)
redis.call('ZADD', P .. 'list:' .. f.ep, f.rid, f.id)
redis.call('ZADD', st(f.ep, 'IN_QUEUE'), expires, f.id)
pub('queue:' .. f.ep); pub('job:' .. f.id)
return cjson.encode(job(f.id))`,

  /** ARGV5 endpoint, ARGV6 worker, ARGV7 max. */
  claim: `
local ep, w, max = ARGV[5], ARGV[6], tonumber(ARGV[7])
local out = {}
for _, id in ipairs(redis.call('ZRANGE', P .. 'q:' .. ep, 0, max * 4 + 16)) do
  if #out >= max then break end
  local j = job(id)
  if j == nil or j.status ~= 'IN_QUEUE' then
    redis.call('ZREM', P .. 'q:' .. ep, id)
  elseif tonumber(j.expires) > now then
    local deadline = now + tonumber(j.timeout)
    redis.call('ZREM', P .. 'q:' .. ep, id)
    redis.call('HSET', jk(id), 'started', n(now), 'worker', w, 'deadline', n(deadline))
    setStatus(j, 'IN_PROGRESS', tonumber(j.expires))
    redis.call('ZADD', P .. 'run', deadline, id)
    redis.call('SADD', P .. 'wjobs:' .. w, id)
    pub('job:' .. id)
    table.insert(out, cjson.encode(job(id)))
  end
end
if #out > 0 and redis.call('EXISTS', P .. 'w:' .. w) == 1 then redis.call('HSET', P .. 'w:' .. w, 'active', n(now)) end
return out`,

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
for _, c in ipairs(chunks) do redis.call('RPUSH', P .. 'ch:' .. j.id, c) end
redis.call('HINCRBY', jk(j.id), 'chunks', #chunks)
pub('job:' .. j.id)
return 1`,

  /** ARGV5 endpoint, ARGV6 job. Returns {job JSON, chunk JSON...} and marks the chunks read. */
  readStream: `
local j = job(ARGV[6])
if not live(j, ARGV[5]) then return nil end
local read = tonumber(j.read)
local chunks = redis.call('LRANGE', P .. 'ch:' .. j.id, read, -1)
if #chunks > 0 then redis.call('HSET', jk(j.id), 'read', n(read + #chunks)) end
table.insert(chunks, 1, cjson.encode(j))
return chunks`,

  /** ARGV5 endpoint, ARGV6 job, ARGV7 first chunk index. Returns {job JSON, chunk JSON...}; marks nothing. */
  readChunks: `
local j = job(ARGV[6])
if not live(j, ARGV[5]) then return nil end
local chunks = redis.call('LRANGE', P .. 'ch:' .. j.id, tonumber(ARGV[7]), -1)
table.insert(chunks, 1, cjson.encode(j))
return chunks`,

  /** ARGV5 worker, ARGV6 job, ARGV7 output|error, ARGV8 payload JSON or '', ARGV9 final chunks, ARGV10 cost e10 or ''. */
  finish: `
local w, id = ARGV[5], ARGV[6]
local j = job(id)
if not live(j) or j.status ~= 'IN_PROGRESS' or j.worker ~= w then return nil end
-- Every argument is checked before the first write: Redis does not roll a failed script back.
local finalChunks = cjson.decode(ARGV[9])
if ARGV[10] ~= '' and not tonumber(ARGV[10]) then return redis.error_reply('cost is not a number') end
local failed = ARGV[7] == 'error'
unrun(j)
redis.call('HDEL', jk(id), 'output', 'error')
if ARGV[8] ~= '' then redis.call('HSET', jk(id), ARGV[7], ARGV[8]) end
if tonumber(j.chunks) == 0 then
  for _, c in ipairs(finalChunks) do redis.call('RPUSH', P .. 'ch:' .. id, c) end
  redis.call('HSET', jk(id), 'chunks', #finalChunks)
end
redis.call('SREM', P .. 'stops:' .. w, id)
if redis.call('EXISTS', P .. 'w:' .. w) == 1 then redis.call('HSET', P .. 'w:' .. w, 'active', n(now)) end
if not failed and ARGV[10] ~= '' and j.key and j.key ~= '' then
  local uk = j.key .. '\\n' .. j.ep
  redis.call('HINCRBY', P .. 'usage:jobs', uk, 1)
  redis.call('HINCRBY', P .. 'usage:cost', uk, ARGV[10])
end
ended(id, failed and 'FAILED' or 'COMPLETED', nil, j)
return cjson.encode(job(id))`,

  /** ARGV5 endpoint, ARGV6 job. */
  cancel: `
local j = job(ARGV[6])
if not live(j, ARGV[5]) then return nil end
if j.status ~= 'IN_QUEUE' and j.status ~= 'IN_PROGRESS' then return cjson.encode(j) end
if j.status == 'IN_QUEUE' then redis.call('ZREM', P .. 'q:' .. j.ep, j.id) else unrun(j); stop(j) end
ended(j.id, 'CANCELLED', nil, j)
return cjson.encode(job(j.id))`,

  /** ARGV5 endpoint, ARGV6 job. Returns job JSON, 'not-found' or 'conflict:<status>'. */
  retry: `
local j = job(ARGV[6])
if not live(j, ARGV[5]) then return 'not-found' end
if j.status ~= 'FAILED' and j.status ~= 'TIMED_OUT' then return 'conflict:' .. j.status end
redis.call('DEL', P .. 'ch:' .. j.id)
-- A stop owed to the earlier run (its timeout) must not cancel the new one.
if j.worker and j.worker ~= '' then redis.call('SREM', P .. 'stops:' .. j.worker, j.id) end
redis.call('HDEL', jk(j.id), 'started', 'completed', 'deadline', 'worker', 'output', 'error', 'progress')
local seq = n(redis.call('INCR', P .. 'seq'))
redis.call('HSET', jk(j.id), 'seq', seq, 'queued', n(now), 'losses', '0', 'retries', n(tonumber(j.retries) + 1), 'chunks', '0', 'read', '0')
setStatus(j, 'IN_QUEUE', now + tonumber(j.ttl))
redis.call('ZADD', P .. 'q:' .. j.ep, seq, j.id)
redis.call('HINCRBY', P .. 'ctr:' .. j.ep, 'retried', 1)
pub('queue:' .. j.ep); pub('job:' .. j.id)
return cjson.encode(job(j.id))`,

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

  /** ARGV5 endpoint, ARGV6 job, ARGV7 new expiry. */
  setExpiry: `
local j = job(ARGV[6])
if not live(j, ARGV[5]) then return nil end
local e = tonumber(ARGV[7])
redis.call('HSET', jk(j.id), 'expires', n(e))
redis.call('ZADD', P .. 'exp', e, j.id)
redis.call('ZADD', st(j.ep, j.status), e, j.id)
return cjson.encode(job(j.id))`,
};
