--[[
  ARGV[5] endpoint, ARGV[6] limit, ARGV[7] cursor ('' for the newest), ARGV[8] status or ''. Returns
  jobs, newest first, reading about as many as it returns: every job from the endpoint's list,
  ended ones of a status from their own (both by rid, the cursor); queued ones from the queue,
  newest first in queue order (the cursor is the seq); running ones, as many as the workers
  run, sorted here.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): job:*, list:*, ls:*, q:*, st:*
]]
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
return out
