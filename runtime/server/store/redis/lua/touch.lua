--[[
  ARGV[5] worker, ARGV[6] endpoint, ARGV[7] running ids JSON or '', ARGV[8] unhealthy JSON or '',
  ARGV[9] '1' when reported, ARGV[10] missingAfterMs or '': jobs held longer that the heartbeat
  leaves out follow the worker-loss rule. ARGV[11] key id, ARGV[12] '1': record no worker not known yet. Returns {requeued, lost} as JSON, or 0
  (changing nothing) when the worker id is another endpoint's or key's.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): dl, dl:*, dlseq, exp, job:*, ls:*, q:*, run, st:*, w:*, wjobs:*, wseen
]]
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
return cjson.encode(settled)
