--[[
  ARGV[5] lease ms, ARGV[6] limit. Returns {id, url, attempts, the ended job as reply() gives it
  (its other fields as JSON, no input, its output)} per due call, leased. (A call recorded
  before the output was kept apart has it in its job's JSON, and nothing (nil) beside it; one
  recorded before the input was left out has an input too, which is not read.)

  Keys, under the prefix ARGV[1] (none is passed in KEYS): dl, dl:*
]]
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'dl', '-inf', now, 'LIMIT', 0, tonumber(ARGV[6]))) do
  local h = redis.call('HMGET', P .. 'dl:' .. id, 'url', 'job', 'attempts', 'output')
  if h[1] then
    redis.call('ZADD', P .. 'dl', now + tonumber(ARGV[5]), id)
    table.insert(out, {id, h[1], h[3], {h[2], false, h[4]}})
  else
    redis.call('ZREM', P .. 'dl', id) -- its call was finished by another holder
  end
end
return out
