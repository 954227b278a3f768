/**
 * The job scripts that calls arriving together share (submissions, takes and results): each has
 * a form for one call and a batch form that runs several in one script (one round trip), in
 * order. A call's answer is the same in both; the batch form answers a list, one entry per call
 * (false for a nil answer).
 */

/**
 * One submission: `fields` the job's fields but its input as a JSON object of strings, `input`
 * its input's JSON (apart, so that a long one is not parsed here), `maxQueued` the most jobs
 * queued to accept one more or '', `w` a worker waiting in job-take on the calling server or ''.
 * Answers the job's seq (the caller knows every other field); {'taken', seq, deadline} when it
 * was written as taken by that worker (no live job queued for the endpoint); {'full', depth} when
 * full; {'duplicate'} when the id is taken. While its Idempotency-Key is kept (nothing written):
 * {'same', job} with the key's job, {'conflict', id} when that job came with another body,
 * {'gone', id} when the job is no longer kept. A queue's depth is read once per script and clock,
 * and counted on from there.
 */
const ENQUEUE = `
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
`;

/**
 * A worker's result: `kind` output or error, `payload` its JSON or '', `pieces` how many stream
 * chunks the output is when it is the job's stream (0: it is not), `cost` in units of 1e-10 or
 * ''. Answers the ended job (reply(), its output left out: it is `payload`) once final, nil when it is
 * not this worker's running job (a repeat, or another worker's), {'error', why} for a bad
 * argument (checked before the first write: Redis does not roll a failed script back).
 */
const FINISH = `
local function finish(w, id, kind, payload, pieces, cost)
  -- Its input is neither read nor answered: nothing reads it once the job has ended.
  local j = jobButInput(id)
  if not live(j) or j.status ~= 'IN_PROGRESS' or j.worker ~= w then return nil end
  pieces = tonumber(pieces)
  if not pieces then return {'error', 'pieces is not a number'} end
  if cost ~= '' and not tonumber(cost) then return {'error', 'cost is not a number'} end
  local failed = kind == 'error'
  unrun(j)
  drop(j, {'output', 'error'})
  local fields = {}
  if payload ~= '' then fields = {kind, payload} end
  -- A job that streamed nothing has its output as its stream (ochunk): its pieces are cut from
  -- the output when read (outputPieces), never written a second time as a chunk list.
  if tonumber(j.chunks) == 0 and pieces > 0 then
    fields[#fields + 1] = 'ochunk'; fields[#fields + 1] = '1'
    fields[#fields + 1] = 'chunks'; fields[#fields + 1] = n(pieces)
  end
  redis.call('ZADD', P .. 'wact', now, w)
  if not failed and cost ~= '' and j.key and j.key ~= '' then
    local uk = j.key .. '\\n' .. j.ep
    redis.call('HINCRBY', P .. 'usage:jobs', uk, 1)
    redis.call('HINCRBY', P .. 'usage:cost', uk, cost)
  end
  ended(j, failed and 'FAILED' or 'COMPLETED', fields)
  -- The output is the payload the caller sent: it is not sent back; nor is the input.
  return reply(j, true, true)
end
`;

/**
 * A worker's take of up to `max` jobs of an endpoint, popped from the queue's head (expired or
 * stale entries popped are the sweep's). Answers the jobs (reply()), oldest first (none: empty).
 */
const CLAIM = `
local function claim(ep, w, max)
  max = tonumber(max)
  local q = P .. 'q:' .. ep
  local out, popped = {}, 0
  while #out < max and popped < max * 4 + 64 do
    local ids = redis.call('ZPOPMIN', q, max - #out)
    if #ids == 0 then break end
    for i = 1, #ids, 2 do
      popped = popped + 1
      local j = job(ids[i])
      if j ~= nil and j.status == 'IN_QUEUE' and tonumber(j.expires) > now then
        local deadline = now + tonumber(j.timeout)
        setStatus(j, 'IN_PROGRESS', tonumber(j.expires), {'started', n(now), 'worker', w, 'deadline', n(deadline)})
        redis.call('ZADD', P .. 'run', deadline, j.id)
        redis.call('SADD', P .. 'wjobs:' .. w, j.id)
        pub('job:' .. j.id)
        out[#out + 1] = reply(j)
      end
    end
  end
  if #out > 0 then redis.call('ZADD', P .. 'wact', now, w) end
  return out
end
`;

/**
 * The one-call script (its arguments from ARGV5) and the batch script (from ARGV5, per call its
 * clock, then its arguments). In a batch each call runs at its own clock, and a call that fails
 * (a Redis error) answers {'error', message} without failing the calls around it, as it would
 * have failed alone.
 */
function oneAndBatch(body: string, fn: string, arity: number): { one: string; batch: string } {
  const args = (from: string) => Array.from({ length: arity }, (_, k) => `ARGV[${from} + ${k}]`).join(", ");
  return {
    one: `${body}\nreturn ${fn}(${args("5")})`,
    batch: `${body}
local out = {}
for i = 5, #ARGV, ${arity + 1} do
  now = tonumber(ARGV[i])
  local ok, r = pcall(${fn}, ${args("i + 1")})
  if not ok then r = {'error', type(r) == 'table' and r.err or tostring(r)}
  elseif r == nil then r = false end
  out[#out + 1] = r
end
return out`,
  };
}

const enqueue = oneAndBatch(ENQUEUE, "enqueue", 4);
const finish = oneAndBatch(FINISH, "finish", 6);
const claim = oneAndBatch(CLAIM, "claim", 3);

export const BATCHED_SCRIPTS = {
  enqueue: enqueue.one,
  enqueueBatch: enqueue.batch,
  finish: finish.one,
  finishBatch: finish.batch,
  claim: claim.one,
  claimBatch: claim.batch,
};

/** The batch form of each batched script. */
export const BATCH_FORM = { enqueue: "enqueueBatch", finish: "finishBatch", claim: "claimBatch" } as const;
