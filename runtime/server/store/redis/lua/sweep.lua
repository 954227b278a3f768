--[[
  ARGV[5] loss timeout, ARGV[6] batch size. Idempotency-Keys past their expiry go too (keys: how many).

  Keys, under the prefix ARGV[1] (none is passed in KEYS): ch:*, dl, dl:*, dlseq, exp, idem:*, idemexp, job:*, list:*, log:*, logm:*, ls:*, q:*, run, st:*, stops:*, w:*, wact, wjobs:*, wseen
]]
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
return cjson.encode(report)
