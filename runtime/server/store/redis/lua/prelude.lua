--[[
  The start of every script of the Redis store: every state change of a job runs as one script,
  so it is atomic across servers, and publishes its topics on the events channel. ARGV[1] is the
  key prefix, ARGV[2] and ARGV[3] the sync and async retention, ARGV[4] now; a script's own
  arguments follow. A script is this prelude, its body (run as the function script() opened at
  the end here), then epilogue.lua.

  Keys, under the prefix ARGV[1] (none is passed in KEYS), through the helpers a body calls:
  job:* (a job's hash), ch:* (its stream), log:* and logm:* (its log), idem:*, q:* (queues), st:*
  and ls:* (by status), exp, run, wjobs:*, stops:*, list:*, dl, dl:*, dlseq (webhook calls owed)
]]
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
-- Every field a job's hash may have but its input (jobFields in redis-enqueue.ts, and the scripts
-- that write one): all a result reads of its job (EndedJob), so that a long input is not copied
-- into the script. A field added to the hash must be added here (test/store/redis-store.test.ts
-- checks the list).
local butInput = {
  'id', 'ep', 'policy', 'timeout', 'ttl', 'low', 'sync', 'webhook', 's3', 'key', 'origin', 'trace',
  'seq', 'rid', 'status', 'created', 'queued', 'expires', 'losses', 'retries', 'chunks', 'read',
  'started', 'worker', 'deadline', 'progress', 'output', 'error', 'completed', 'ochunk',
}
-- The job but its input (nil when there is none): all a result reads.
local function jobButInput(id)
  local v = redis.call('HMGET', jk(id), unpack(butInput))
  if not v[1] then return nil end
  local t = {}
  for i = 1, #butInput do if v[i] then t[butInput[i]] = v[i] end end
  return t
end
-- A job as a script answers it: {its other fields as JSON, its input, its output (false when
-- none, or left out when the caller has it)}. The input and output go as they are stored: long
-- texts are never escaped into JSON again here nor taken apart twice by the caller (see
-- replyFields in redis-job-codec.ts). An ended job's answer leaves its input out (EndedJob in
-- store.ts: nothing reads it once the job has ended).
local function reply(j, outputKnown, ended)
  local input, output = j.input, j.output
  j.input = nil; j.output = nil
  local fields = cjson.encode(j)
  j.input = input; j.output = output
  if outputKnown then output = nil end
  if ended then input = nil end
  return {fields, input or false, output or false}
end
local function live(j, ep) return j ~= nil and (ep == nil or j.ep == ep) and tonumber(j.expires) > now end
-- Topics are collected, each once, and published when the script ends (one message, a JSON array when several).
local topics, topicSeen = {}, {}
local function pub(topic)
  if topicSeen[topic] then return end
  topicSeen[topic] = true
  topics[#topics + 1] = topic
end
-- Topics of removed jobs: their listener counts go once the last announcement is out.
local forgotten = {}
local function st(ep, status) return P .. 'st:' .. ep .. ':' .. status end
-- Ended jobs of one status, by listing order (rid), for /requests?status=: written as a job ends.
local ENDED = {COMPLETED = true, FAILED = true, CANCELLED = true, TIMED_OUT = true}
local function ls(ep, status) return P .. 'ls:' .. ep .. ':' .. status end
-- Writes fields (name, value, ...) to the job's hash and to the table j, in one HSET.
local function put(j, fields)
  redis.call('HSET', jk(j.id), unpack(fields))
  for i = 1, #fields, 2 do j[fields[i]] = fields[i + 1] end
end
-- Deletes the named fields the job has (none: no command).
local function drop(j, names)
  local present = {}
  for _, f in ipairs(names) do if j[f] ~= nil then present[#present + 1] = f; j[f] = nil end end
  if #present > 0 then redis.call('HDEL', jk(j.id), unpack(present)) end
end
-- The status and expiry indexes, then the hash with `fields`; exp is written only when the expiry moves.
local function setStatus(j, new, expires, fields)
  local e = n(expires)
  redis.call('ZREM', st(j.ep, j.status), j.id)
  redis.call('ZADD', st(j.ep, new), expires, j.id)
  if j.low == '1' then
    if new == 'IN_QUEUE' then redis.call('ZADD', st(j.ep, 'LOW'), expires, j.id)
    elseif j.status == 'IN_QUEUE' then redis.call('ZREM', st(j.ep, 'LOW'), j.id) end
  end
  if ENDED[j.status] then redis.call('ZREM', ls(j.ep, j.status), j.id) end
  if ENDED[new] then redis.call('ZADD', ls(j.ep, new), j.rid, j.id) end
  if e ~= j.expires then redis.call('ZADD', P .. 'exp', expires, j.id) end
  local f = {'status', new, 'expires', e}
  for _, v in ipairs(fields or {}) do f[#f + 1] = v end
  put(j, f)
end
local function retention(j) if j.sync == '1' then return tonumber(ARGV[2]) end return tonumber(ARGV[3]) end
local function owe(j)
  if j.webhook and j.webhook ~= '' then
    local d = j.id .. ':' .. redis.call('INCR', P .. 'dlseq')
    -- The ended job as reply() gives it: its output kept as it is, not escaped into JSON.
    local r = reply(j, false, true)
    local f = {'url', j.webhook, 'job', r[1], 'attempts', 0}
    if r[3] then f[#f + 1] = 'output'; f[#f + 1] = r[3] end
    redis.call('HSET', P .. 'dl:' .. d, unpack(f))
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
-- RPUSH of many values, in slices (unpack has a stack limit).
local function rpush(key, list)
  for i = 1, #list, 1000 do redis.call('RPUSH', key, unpack(list, i, math.min(i + 999, #list))) end
end
local function unrun(j)
  redis.call('ZREM', P .. 'run', j.id)
  if j.worker and j.worker ~= '' then redis.call('SREM', P .. 'wjobs:' .. j.worker, j.id) end
end
local function remove(j)
  redis.call('DEL', jk(j.id), P .. 'ch:' .. j.id, P .. 'log:' .. j.id, P .. 'logm:' .. j.id)
  -- A job queued before keys were kept apart names its key (idem), which goes with it, unless a
  -- later job holds the key already. A key written since is kept until its own expiry.
  if j.idem and redis.call('HGET', j.idem, 'job') == j.id then redis.call('DEL', j.idem) end
  forgotten[#forgotten + 1] = 'job:' .. j.id
  redis.call('ZREM', P .. 'q:' .. j.ep, j.id)
  redis.call('ZREM', P .. 'exp', j.id)
  redis.call('ZREM', P .. 'list:' .. j.ep, j.id)
  redis.call('ZREM', st(j.ep, j.status), j.id)
  if ENDED[j.status] then redis.call('ZREM', ls(j.ep, j.status), j.id) end
  if j.low == '1' then redis.call('ZREM', st(j.ep, 'LOW'), j.id) end
  unrun(j)
end
-- A final state. worker and deadline stay in the hash (read only while IN_PROGRESS), saving a write.
local function ended(j, status, fields)
  drop(j, {'progress'})
  fields = fields or {}
  fields[#fields + 1] = 'completed'; fields[#fields + 1] = n(now)
  setStatus(j, status, now + retention(j), fields)
  owe(j)
  pub('job:' .. j.id)
end
-- A running job (already unrun) back in its queue, in its place, with `fields` written too.
local function requeue(j, fields)
  drop(j, {'worker', 'started', 'deadline', 'progress'})
  setStatus(j, 'IN_QUEUE', tonumber(j.expires), fields)
  redis.call('ZADD', P .. 'q:' .. j.ep, j.seq, j.id)
  pub('queue:' .. j.ep); pub('job:' .. j.id)
end
-- The worker-loss rule for one job: re-queued the first time, FAILED the second.
local function lose(j, w, why)
  unrun(j)
  if tonumber(j.losses) == 0 then
    requeue(j, {'losses', '1'})
    return 'requeued'
  end
  ended(j, 'FAILED', {'error', cjson.encode('worker ' .. w .. ' was lost while running the job (' .. why .. '), twice')})
  return 'lost'
end
local function script()
