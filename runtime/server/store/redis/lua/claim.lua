--[[
  A worker's take of up to `max` jobs of an endpoint, popped from the queue's head (expired or
  stale entries popped are the sweep's). Answers the jobs (reply()), oldest first (none: empty).

  Run as claim (one call: one-call.lua) or claimBatch (several: batch.lua).

  Keys, under the prefix ARGV[1] (none is passed in KEYS): exp, job:*, ls:*, q:*, run, st:*, wact, wjobs:*
]]
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

local call, arity = claim, 3
