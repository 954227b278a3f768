--[[
  ARGV[5] endpoint, ARGV[6] loss timeout. Returns [completed, failed, inProgress, inQueue, retried, idle, running, unhealthy].

  Keys, under the prefix ARGV[1] (none is passed in KEYS): ctr:*, job:*, st:*, w:*, wjobs:*, wseen
]]
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
  tonumber(redis.call('HGET', P .. 'ctr:' .. ep, 'retried') or '0'), idle, running, unhealthy}
