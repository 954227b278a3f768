--[[
  The batch form of a batched script (enqueue, finish, claim), after its body, which sets `call`
  and `arity`: from ARGV[5], per call its clock, then its arguments. In a batch each call runs at
  its own clock, and a call that fails (a Redis error) answers {'error', message} without failing
  the calls around it, as it would have failed alone. Answers a list, one entry per call (false
  for a nil answer).
]]
local out = {}
for i = 5, #ARGV, arity + 1 do
  now = tonumber(ARGV[i])
  local ok, r = pcall(call, unpack(ARGV, i + 1, i + arity))
  if not ok then r = {'error', type(r) == 'table' and r.err or tostring(r)}
  elseif r == nil then r = false end
  out[#out + 1] = r
end
return out
