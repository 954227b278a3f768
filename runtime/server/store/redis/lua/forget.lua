--[[
  ARGV[5] worker: gone now, so the next sweep applies the worker-loss rule and health forgets it.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): wseen
]]
if redis.call('ZSCORE', P .. 'wseen', ARGV[5]) then redis.call('ZADD', P .. 'wseen', 0, ARGV[5]) end
return 1
