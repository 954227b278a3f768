--[[
  A worker of ARGV[5] (endpoint) started: its run of failed starts ends.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): startfail
]]
local k, ep = P .. 'startfail', ARGV[5]
if redis.call('HDEL', k, ep .. ':n', ep .. ':first', ep .. ':perm', ep .. ':last') > 0 then
  pub('start-failures') -- topics.startFailures (store-events.ts)
end
return 0
