--[[
  ARGV[5] endpoint, ARGV[6] loss timeout.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): job:*, q:*, st:*, w:*, wact, wjobs:*, wseen
]]
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
  inProgress = redis.call('ZCOUNT', st(ep, 'IN_PROGRESS'), '(' .. n(now), '+inf'), workers = workers})
