--[[
  Reserves admissions for one server: ARGV[5] bucket, ARGV[6] requests per window, ARGV[7]
  concurrent limit or '', ARGV[8] window ms, ARGV[9] window tokens wanted, ARGV[10]... ids of the
  concurrent slots wanted. Returns {tokens granted, slots granted (the first ids), Retry-After s};
  nothing is granted past a limit, and no slot when no token is. A refused slot marks the bucket
  wanted for a second, so that servers holding spare slots give them back.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): rc:*, rl:*
]]
local window = tonumber(ARGV[8])
local start = now - (now % window)
local retry = math.max(1, math.ceil((start + window - now) / 1000))
local want = tonumber(ARGV[9])
local tokens = 0
if want > 0 then
  local wk = P .. 'rl:' .. ARGV[5] .. ':' .. n(start)
  local used = redis.call('INCRBY', wk, want)
  if used == want then redis.call('PEXPIRE', wk, window * 2) end
  local over = math.min(want, math.max(0, used - tonumber(ARGV[6])))
  if over > 0 then redis.call('DECRBY', wk, over) end
  tokens = want - over
  if tokens == 0 then return {0, 0, retry} end
end
local slots = 0
local ids = #ARGV - 9
if ids > 0 then
  local ck = P .. 'rc:' .. ARGV[5]
  local limit = tonumber(ARGV[7])
  local held = redis.call('ZCARD', ck)
  if held + ids > limit then
    -- Slots of a server that died without giving them back are freed after ten minutes.
    redis.call('ZREMRANGEBYSCORE', ck, '-inf', now - 600000)
    held = redis.call('ZCARD', ck)
  end
  slots = math.min(ids, math.max(0, limit - held))
  if slots > 0 then
    local args = {}
    for i = 1, slots do args[#args + 1] = ARGV[4]; args[#args + 1] = ARGV[9 + i] end
    redis.call('ZADD', ck, unpack(args))
  else
    redis.call('SET', ck .. ':wanted', '1', 'PX', 1000)
  end
end
return {tokens, slots, retry}
