--[[
  ARGV[5] worker, ARGV[6].. jobs it was given but never received: queued again in their place, no loss counted.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): exp, job:*, ls:*, q:*, run, st:*, wjobs:*
]]
local w = ARGV[5]
for i = 6, #ARGV do
  local j = job(ARGV[i])
  if j ~= nil and j.status == 'IN_PROGRESS' and j.worker == w then
    unrun(j)
    requeue(j)
  end
end
return 0
