--[[
  The one-call form of a batched script (enqueue, finish, claim), after its body, which sets
  `call` and `arity`: the call's arguments are ARGV[5] on.
]]
return call(unpack(ARGV, 5, 4 + arity))
