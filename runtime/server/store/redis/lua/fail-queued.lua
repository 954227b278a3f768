--[[
  ARGV[5] endpoint, ARGV[6] error JSON, ARGV[7] limit. Ends up to `limit` of its live queued jobs
  FAILED with that error, first in queue order; answers them (ended). One call stays short
  whatever the queue's length: the caller repeats it while a whole batch failed.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): dl, dl:*, dlseq, exp, job:*, ls:*, q:*, st:*
]]
local q = P .. 'q:' .. ARGV[5]
local limit = tonumber(ARGV[7])
local failed, skipped = {}, 0
while #failed < limit do
  local ids = redis.call('ZRANGE', q, skipped, skipped + limit - #failed - 1)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    local j = job(id)
    if live(j) and j.status == 'IN_QUEUE' then
      redis.call('ZREM', q, j.id)
      ended(j, 'FAILED', {'error', ARGV[6]})
      failed[#failed + 1] = reply(j, false, true)
    else
      skipped = skipped + 1 -- expired: the sweep's to remove
    end
  end
end
return failed
