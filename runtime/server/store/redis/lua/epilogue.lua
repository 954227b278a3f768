--[[
  The end of every script: closes the function script() that prelude.lua opened, runs it, then
  publishes the topics it collected.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): listen (read, and a removed job's
  entry dropped), events (PUBLISH)
]]
end
local result = script()
-- A job's topic goes out only while a server listens to it (see redis-events.ts).
local out, jobs = {}, {}
for _, t in ipairs(topics) do
  if string.sub(t, 1, 4) == 'job:' then jobs[#jobs + 1] = t else out[#out + 1] = t end
end
for i = 1, #jobs, 1000 do
  local counts = redis.call('HMGET', P .. 'listen', unpack(jobs, i, math.min(i + 999, #jobs)))
  for k, c in ipairs(counts) do
    if c and tonumber(c) > 0 then out[#out + 1] = jobs[i + k - 1] end
  end
end
if #out == 1 then redis.call('PUBLISH', P .. 'events', out[1])
elseif #out > 1 then redis.call('PUBLISH', P .. 'events', cjson.encode(out)) end
for i = 1, #forgotten, 1000 do redis.call('HDEL', P .. 'listen', unpack(forgotten, i, math.min(i + 999, #forgotten))) end
return result
