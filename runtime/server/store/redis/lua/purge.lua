--[[
  ARGV[5] endpoint.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): ch:*, exp, idem:*, job:*, list:*, log:*, logm:*, ls:*, q:*, run, st:*, wjobs:*
]]
local removed = 0
for _, id in ipairs(redis.call('ZRANGE', P .. 'q:' .. ARGV[5], 0, -1)) do
  local j = job(id)
  if j ~= nil and j.status == 'IN_QUEUE' then
    if live(j) then removed = removed + 1 end
    remove(j)
    pub('job:' .. id)
  end
end
redis.call('DEL', P .. 'q:' .. ARGV[5])
return removed
