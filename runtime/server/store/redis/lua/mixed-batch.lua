--[[
  The mixed form of the batched scripts: calls of enqueue, finish and claim made together, run
  in one script (one round trip) in the order they were made, after the three bodies (each sets
  `call` and `arity`; the mixed form names the functions). From ARGV[5], per call: its kind (e,
  f or c), its clock, then its arguments. As in batch.lua, a call that fails answers {'error',
  message} without failing the calls around it; answers a list, one entry per call (false for nil).
  A kind it does not know fails the whole run before any call runs.
]]
local kinds = {e = {enqueue, 4}, f = {finish, 6}, c = {claim, 3}}
-- Every call's kind is checked before any runs: a run that cannot be read changes nothing.
local j = 5
while j <= #ARGV do
  local k = kinds[ARGV[j]]
  if k == nil then return redis.error_reply('unknown call kind ' .. tostring(ARGV[j])) end
  j = j + 2 + k[2]
end
local out = {}
local i = 5
while i <= #ARGV do
  local k = kinds[ARGV[i]]
  local ok, r
  now = tonumber(ARGV[i + 1])
  ok, r = pcall(k[1], unpack(ARGV, i + 2, i + 1 + k[2]))
  i = i + 2 + k[2]
  -- A claim takes from the queue: the depths enqueue counted at this clock are stale.
  if k[1] == claim then for ep in pairs(depths) do depths[ep] = nil end end
  if not ok then r = {'error', type(r) == 'table' and r.err or tostring(r)}
  elseif r == nil then r = false end
  out[#out + 1] = r
end
return out
