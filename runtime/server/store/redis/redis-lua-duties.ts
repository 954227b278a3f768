import { topics } from "../store-events.ts";

/** Lua for reads that must be consistent, housekeeping, workers, leases, limits and webhooks. */
export const DUTY_SCRIPTS = {
  /** ARGV5 endpoint, ARGV6 loss timeout. Returns [completed, failed, inProgress, inQueue, retried, idle, running, unhealthy]. */
  health: `
local ep = ARGV[5]
local function count(s) return redis.call('ZCOUNT', st(ep, s), '(' .. n(now), '+inf') end
local idle, running, unhealthy = 0, 0, 0
for _, w in ipairs(redis.call('ZRANGEBYSCORE', P .. 'wseen', '(' .. n(now - tonumber(ARGV[6])), '+inf')) do
  if redis.call('HGET', P .. 'w:' .. w, 'ep') == ep then
    local busy = false
    for _, id in ipairs(redis.call('SMEMBERS', P .. 'wjobs:' .. w)) do
      local j = job(id)
      if live(j) and j.status == 'IN_PROGRESS' then busy = true end
    end
    if busy then running = running + 1
    elseif redis.call('HEXISTS', P .. 'w:' .. w, 'unhealthy') == 1 then unhealthy = unhealthy + 1
    else idle = idle + 1 end
  end
end
return {count('COMPLETED'), count('FAILED') + count('TIMED_OUT'), count('IN_PROGRESS'), count('IN_QUEUE'),
  tonumber(redis.call('HGET', P .. 'ctr:' .. ep, 'retried') or '0'), idle, running, unhealthy}`,

  /** ARGV5 endpoint, ARGV6 loss timeout. */
  scaling: `
local ep = ARGV[5]
local live_ = '(' .. n(now)
local low = redis.call('ZCOUNT', st(ep, 'LOW'), live_, '+inf')
local queued = redis.call('ZCOUNT', st(ep, 'IN_QUEUE'), live_, '+inf') - low
-- The oldest normal job is the first live one from the queue's head (queue order is submission
-- order; a lost worker's job keeps its place): walk past low-priority and expired ones only.
local oldest = nil
local from = 0
while oldest == nil and queued > 0 do
  local ids = redis.call('ZRANGE', P .. 'q:' .. ep, from, from + 99)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    local h = redis.call('HMGET', jk(id), 'status', 'expires', 'low', 'queued')
    if h[1] == 'IN_QUEUE' and tonumber(h[2]) > now and h[3] ~= '1' then oldest = tonumber(h[4]); break end
  end
  from = from + 100
end
local workers = {}
for _, w in ipairs(redis.call('ZRANGEBYSCORE', P .. 'wseen', '(' .. n(now - tonumber(ARGV[6])), '+inf')) do
  local h = redis.call('HMGET', P .. 'w:' .. w, 'ep', 'unhealthy')
  if h[1] == ep then
    local running = 0
    for _, id in ipairs(redis.call('SMEMBERS', P .. 'wjobs:' .. w)) do
      local j = job(id)
      if live(j) and j.status == 'IN_PROGRESS' then running = running + 1 end
    end
    local active = redis.call('ZSCORE', P .. 'wact', w)
    table.insert(workers, {id = w, running = running, unhealthy = h[2] ~= false, lastActive = active and tonumber(active) or nil})
  end
end
return cjson.encode({queued = queued, queuedLowPriority = low, oldestQueuedAt = oldest,
  inProgress = redis.call('ZCOUNT', st(ep, 'IN_PROGRESS'), '(' .. n(now), '+inf'), workers = workers})`,

  /**
   * ARGV5 endpoint, ARGV6 limit, ARGV7 cursor ('' for the newest), ARGV8 status or ''. Returns
   * jobs, newest first, reading about as many as it returns: every job from the endpoint's list,
   * ended ones of a status from their own (both by rid, the cursor); queued ones from the queue,
   * newest first in queue order (the cursor is the seq); running ones, as many as the workers
   * run, sorted here.
   */
  recent: `
local ep, status, want = ARGV[5], ARGV[8], tonumber(ARGV[6])
local out = {}
if status == 'IN_PROGRESS' then
  local below = ARGV[7] == '' and math.huge or tonumber(ARGV[7])
  local running = {}
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', st(ep, 'IN_PROGRESS'), '(' .. n(now), '+inf')) do
    local rid = tonumber(redis.call('HGET', jk(id), 'rid'))
    if rid and rid < below then running[#running + 1] = {rid, id} end
  end
  table.sort(running, function(a, b) return a[1] > b[1] end)
  for i = 1, math.min(want, #running) do
    local j = job(running[i][2])
    if live(j) and j.status == status then table.insert(out, reply(j)) end
  end
  return out
end
local key = P .. 'list:' .. ep
if status == 'IN_QUEUE' then key = P .. 'q:' .. ep elseif status ~= '' then key = ls(ep, status) end
local max = ARGV[7] == '' and '+inf' or ('(' .. ARGV[7])
while #out < want do
  local ids = redis.call('ZREVRANGEBYSCORE', key, max, '-inf', 'WITHSCORES', 'LIMIT', 0, want - #out)
  if #ids == 0 then break end
  for i = 1, #ids, 2 do
    local j = job(ids[i])
    if live(j) and (status == '' or j.status == status) then table.insert(out, reply(j)) end
    max = '(' .. ids[i + 1]
  end
end
return out`,

  /**
   * ARGV5 worker, ARGV6 endpoint, ARGV7 running ids JSON or '', ARGV8 unhealthy JSON or '',
   * ARGV9 '1' when reported, ARGV10 missingAfterMs or '': jobs held longer that the heartbeat
   * leaves out follow the worker-loss rule. ARGV11 key id, ARGV12 '1': record no worker not known yet. Returns {requeued, lost} as JSON, or 0
   * (changing nothing) when the worker id is another endpoint's or key's.
   */
  touch: `
local wk = P .. 'w:' .. ARGV[5]
local owner = redis.call('HMGET', wk, 'ep', 'key')
-- A worker written before ids had owners (no key) is claimed by the key that uses it next.
if owner[1] and (owner[1] ~= ARGV[6] or (owner[2] and owner[2] ~= ARGV[11])) then return 0 end
if not owner[1] and ARGV[12] == '1' then return 0 end
local settled = {requeued = {}, lost = {}}
if ARGV[7] ~= '' and ARGV[10] ~= '' then
  local reported = {}
  for _, id in ipairs(cjson.decode(ARGV[7])) do reported[id] = true end
  local before = now - tonumber(ARGV[10])
  for _, id in ipairs(redis.call('SMEMBERS', P .. 'wjobs:' .. ARGV[5])) do
    local j = job(id)
    if j ~= nil and j.status == 'IN_PROGRESS' and j.worker == ARGV[5] and tonumber(j.started) <= before and not reported[id] then
      table.insert(settled[lose(j, ARGV[5], 'its heartbeat no longer listed the job')], id)
    end
  end
end
redis.call('HSET', wk, 'ep', ARGV[6], 'key', ARGV[11], 'seen', n(now))
redis.call('ZADD', P .. 'wseen', now, ARGV[5])
if ARGV[7] ~= '' then redis.call('HSET', wk, 'ids', ARGV[7]) end
if ARGV[9] == '1' then
  if ARGV[8] == '' then redis.call('HDEL', wk, 'unhealthy') else redis.call('HSET', wk, 'unhealthy', ARGV[8]) end
end
if #settled.requeued + #settled.lost == 0 then return 1 end
return cjson.encode(settled)`,

  /** ARGV5 worker. */
  takeStops: `
local k = P .. 'stops:' .. ARGV[5]
local ids = redis.call('SMEMBERS', k)
redis.call('DEL', k)
return ids`,

  /** ARGV5 worker: gone now, so the next sweep applies the worker-loss rule and health forgets it. */
  forget: `
if redis.call('ZSCORE', P .. 'wseen', ARGV[5]) then redis.call('ZADD', P .. 'wseen', 0, ARGV[5]) end
return 1`,

  /** ARGV5 loss timeout, ARGV6 batch size. Idempotency-Keys past their expiry go too (keys: how many). */
  sweep: `
local batch = tonumber(ARGV[6])
local report = {expired = 0, timedOut = {}, requeued = {}, lost = {}, keys = 0}
for _, k in ipairs(redis.call('ZRANGEBYSCORE', P .. 'idemexp', '-inf', now, 'LIMIT', 0, batch)) do
  redis.call('DEL', k)
  redis.call('ZREM', P .. 'idemexp', k)
  report.keys = report.keys + 1
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'exp', '-inf', now, 'LIMIT', 0, batch)) do
  local j = job(id)
  if j ~= nil then
    if j.status == 'IN_PROGRESS' then stop(j) end
    remove(j)
  else
    redis.call('ZREM', P .. 'exp', id)
    forgotten[#forgotten + 1] = 'job:' .. id
  end
  pub('job:' .. id)
  report.expired = report.expired + 1
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'run', '-inf', now, 'LIMIT', 0, batch)) do
  local j = job(id)
  if j ~= nil and j.status == 'IN_PROGRESS' then
    unrun(j); stop(j)
    ended(j, 'TIMED_OUT', {'error', cjson.encode('execution timeout of ' .. j.timeout .. ' ms exceeded')})
    table.insert(report.timedOut, {jobId = id, workerId = j.worker})
  else
    redis.call('ZREM', P .. 'run', id)
  end
end
for _, w in ipairs(redis.call('ZRANGEBYSCORE', P .. 'wseen', '-inf', now - tonumber(ARGV[5]), 'LIMIT', 0, batch)) do
  for _, id in ipairs(redis.call('SMEMBERS', P .. 'wjobs:' .. w)) do
    local j = job(id)
    if j ~= nil and j.status == 'IN_PROGRESS' and j.worker == w then
      local outcome = lose(j, w, 'it stopped sending heartbeats')
      table.insert(outcome == 'requeued' and report.requeued or report.lost, id)
    end
  end
  redis.call('DEL', P .. 'w:' .. w, P .. 'wjobs:' .. w, P .. 'stops:' .. w)
  redis.call('ZREM', P .. 'wseen', w)
  redis.call('ZREM', P .. 'wact', w)
end
return cjson.encode(report)`,

  /** ARGV5 name, ARGV6 holder, ARGV7 ttl. */
  lease: `
local k = P .. 'lease:' .. ARGV[5]
local cur = redis.call('GET', k)
if cur and cur ~= ARGV[6] then return 0 end
redis.call('SET', k, ARGV[6], 'PX', ARGV[7])
return 1`,

  /**
   * A failed worker start: ARGV5 endpoint, ARGV6 its time, ARGV7 '1' when permanent, ARGV8 the
   * failure's JSON. Each endpoint's run is four fields of the hash startfail (<ep>:n, :first,
   * :perm, :last). Returns {attempts, first, perm}.
   */
  startFailed: `
local k, ep = P .. 'startfail', ARGV[5]
local attempts = redis.call('HINCRBY', k, ep .. ':n', 1)
redis.call('HSETNX', k, ep .. ':first', ARGV[6])
if ARGV[7] == '1' then redis.call('HSET', k, ep .. ':perm', '1') end
redis.call('HSET', k, ep .. ':last', ARGV[8])
pub('${topics.startFailures}')
return {attempts, redis.call('HGET', k, ep .. ':first'), redis.call('HGET', k, ep .. ':perm') or '0'}`,

  /** A worker of ARGV5 (endpoint) started: its run of failed starts ends. */
  startEnded: `
local k, ep = P .. 'startfail', ARGV[5]
if redis.call('HDEL', k, ep .. ':n', ep .. ':first', ep .. ':perm', ep .. ':last') > 0 then pub('${topics.startFailures}') end
return 0`,

  /**
   * Reserves admissions for one server: ARGV5 bucket, ARGV6 requests per window, ARGV7
   * concurrent limit or '', ARGV8 window ms, ARGV9 window tokens wanted, ARGV10... ids of the
   * concurrent slots wanted. Returns {tokens granted, slots granted (the first ids), Retry-After s};
   * nothing is granted past a limit, and no slot when no token is. A refused slot marks the bucket
   * wanted for a second, so that servers holding spare slots give them back.
   */
  reserve: `
local window = tonumber(ARGV[8])
local start = now - (now % window)
local retry = math.max(1, math.ceil((start + window - now) / 1000))
local want = tonumber(ARGV[9])
local tokens = 0
if want > 0 then
  local wk = P .. 'rl:' .. ARGV[5] .. ':' .. n(start)
  local used = redis.call('INCRBY', wk, want)
  if used == want then redis.call('PEXPIRE', wk, window * 2) end
  local over = math.min(want, math.max(0, used - tonumber(ARGV[6])))
  if over > 0 then redis.call('DECRBY', wk, over) end
  tokens = want - over
  if tokens == 0 then return {0, 0, retry} end
end
local slots = 0
local ids = #ARGV - 9
if ids > 0 then
  local ck = P .. 'rc:' .. ARGV[5]
  local limit = tonumber(ARGV[7])
  local held = redis.call('ZCARD', ck)
  if held + ids > limit then
    -- Slots of a server that died without giving them back are freed after ten minutes.
    redis.call('ZREMRANGEBYSCORE', ck, '-inf', now - 600000)
    held = redis.call('ZCARD', ck)
  end
  slots = math.min(ids, math.max(0, limit - held))
  if slots > 0 then
    local args = {}
    for i = 1, slots do args[#args + 1] = ARGV[4]; args[#args + 1] = ARGV[9 + i] end
    redis.call('ZADD', ck, unpack(args))
  else
    redis.call('SET', ck .. ':wanted', '1', 'PX', 1000)
  end
end
return {tokens, slots, retry}`,

  /**
   * ARGV5 lease ms, ARGV6 limit. Returns {id, url, attempts, the ended job as reply() gives it
   * (its other fields as JSON, no input, its output)} per due call, leased. (A call recorded
   * before the output was kept apart has it in its job's JSON, and nothing (nil) beside it; one
   * recorded before the input was left out has an input too, which is not read.)
   */
  takeDue: `
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'dl', '-inf', now, 'LIMIT', 0, tonumber(ARGV[6]))) do
  local h = redis.call('HMGET', P .. 'dl:' .. id, 'url', 'job', 'attempts', 'output')
  if h[1] then
    redis.call('ZADD', P .. 'dl', now + tonumber(ARGV[5]), id)
    table.insert(out, {id, h[1], h[3], {h[2], false, h[4]}})
  else
    redis.call('ZREM', P .. 'dl', id) -- its call was finished by another holder
  end
end
return out`,

  /** ARGV5 delivery id, ARGV6 next attempt: only while the call is still owed. */
  deliveryRetry: `
local k = P .. 'dl:' .. ARGV[5]
if redis.call('EXISTS', k) == 0 then return 0 end
redis.call('HINCRBY', k, 'attempts', 1)
redis.call('ZADD', P .. 'dl', tonumber(ARGV[6]), ARGV[5])
return 1`,

  /** ARGV5 key id or name. */
  revokeKey: `
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
return count`,
};
