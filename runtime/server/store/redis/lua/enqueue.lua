--[[
  One submission: `fields` the job's fields but its input as a JSON object of strings, `input`
  its input's JSON (apart, so that a long one is not parsed here), `maxQueued` the most jobs
  queued to accept one more or '', `w` a worker waiting in job-take on the calling server or ''.
  Answers the job's seq (the caller knows every other field); {'taken', seq, deadline} when it
  was written as taken by that worker (no live job queued for the endpoint); {'full', depth} when
  full; {'duplicate'} when the id is taken. While its Idempotency-Key is kept (nothing written):
  {'same', job} with the key's job, {'conflict', id} when that job came with another body,
  {'gone', id} when the job is no longer kept. A queue's depth is read once per script and clock,
  and counted on from there.

  Run as enqueue (one call: one-call.lua) or enqueueBatch (several: batch.lua).

  Keys, under the prefix ARGV[1] (none is passed in KEYS): exp, idem:*, idemexp, job:*, list:*, q:*, run, seq, st:*, wact, wjobs:*
]]
-- Per endpoint: {depth, the clock it was counted at}; counted again for a call at another clock.
local depths = {}
local function depthOf(ep)
  local d = depths[ep]
  if d == nil or d[2] ~= now then
    -- Live jobs only (expired ones still in the queue until swept do not count).
    d = {redis.call('ZCOUNT', st(ep, 'IN_QUEUE'), '(' .. n(now), '+inf'), now}
    depths[ep] = d
  end
  return d[1]
end
local function enqueue(fields, input, maxQueued, w)
  local f = cjson.decode(fields)
  -- An Idempotency-Key (its scope in f.idem, its body's hash in f.ih, its ttl in f.ittl): while it
  -- is kept, its job is answered. Its key, a hash {job, ih, exp}, is written with the job and kept
  -- until exp (the sweep removes it, by the index idemexp), whatever becomes of the job.
  local ik, ih, ittl = nil, f.ih, f.ittl
  if f.idem then
    ik = P .. 'idem:' .. f.idem
    f.idem = nil; f.ih = nil; f.ittl = nil
    local prior = redis.call('HMGET', ik, 'job', 'ih', 'exp')
    if prior[1] then
      local pj = job(prior[1])
      local alive = live(pj, f.ep)
      -- A key written before keys had an expiry of their own is kept as long as its job.
      if (prior[3] and tonumber(prior[3]) > now) or (not prior[3] and alive) then
        if prior[2] ~= ih then return {'conflict', prior[1]} end
        if alive then return {'same', reply(pj)} end
        return {'gone', prior[1]}
      end
    end
  end
  f.input = input
  local taken = w ~= '' and depthOf(f.ep) == 0
  if maxQueued ~= '' and not taken then
    local depth = depthOf(f.ep)
    if depth > tonumber(maxQueued) then return {'full', depth} end
  end
  if redis.call('EXISTS', jk(f.id)) == 1 then return {'duplicate'} end
  -- One counter gives both the queue order (seq, renewed by a retry) and the listing order (rid).
  local seq = n(redis.call('INCR', P .. 'seq'))
  f.seq = seq; f.rid = seq
  f.status = 'IN_QUEUE'; f.created = n(now); f.queued = n(now)
  f.losses = '0'; f.retries = '0'; f.chunks = '0'; f.read = '0'
  local expires = now + tonumber(f.ttl)
  f.expires = n(expires)
  local deadline = now + tonumber(f.timeout)
  if taken then f.status = 'IN_PROGRESS'; f.started = n(now); f.worker = w; f.deadline = n(deadline) end
  local args = {}
  for k, v in pairs(f) do args[#args + 1] = k; args[#args + 1] = v end
  redis.call('HSET', jk(f.id), unpack(args))
  if ik then
    local exp = now + tonumber(ittl)
    redis.call('HSET', ik, 'job', f.id, 'ih', ih, 'exp', n(exp))
    redis.call('ZADD', P .. 'idemexp', exp, ik)
  end
  redis.call('ZADD', P .. 'exp', expires, f.id)
  redis.call('ZADD', P .. 'list:' .. f.ep, seq, f.id)
  redis.call('ZADD', st(f.ep, f.status), expires, f.id)
  -- Counted as soon as it is in the index the depth is read from.
  if not taken and depths[f.ep] ~= nil then depths[f.ep][1] = depths[f.ep][1] + 1 end
  if taken then
    -- As a claim leaves it: running until its deadline, on the worker's list.
    redis.call('ZADD', P .. 'run', deadline, f.id)
    redis.call('SADD', P .. 'wjobs:' .. w, f.id)
    redis.call('ZADD', P .. 'wact', now, w)
    pub('job:' .. f.id)
    return {'taken', seq, n(deadline)}
  end
  redis.call('ZADD', P .. 'q:' .. f.ep, seq, f.id)
  -- Low-priority queued jobs have an index of their own: the scaler counts them apart.
  if f.low == '1' then redis.call('ZADD', st(f.ep, 'LOW'), expires, f.id) end
  pub('queue:' .. f.ep)
  return seq
end

local call, arity = enqueue, 4
