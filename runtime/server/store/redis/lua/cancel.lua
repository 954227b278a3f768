--[[
  ARGV[5] endpoint, ARGV[6] job. Returns {1 if this call cancelled it, else 0; job}, or nil.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): dl, dl:*, dlseq, exp, job:*, ls:*, q:*, run, st:*, stops:*, wjobs:*
]]
local j = job(ARGV[6])
if not live(j, ARGV[5]) then return nil end
if j.status ~= 'IN_QUEUE' and j.status ~= 'IN_PROGRESS' then return {0, reply(j)} end
if j.status == 'IN_QUEUE' then redis.call('ZREM', P .. 'q:' .. j.ep, j.id) else unrun(j); stop(j) end
ended(j, 'CANCELLED')
return {1, reply(j)}
