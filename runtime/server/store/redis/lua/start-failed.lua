--[[
  A failed worker start: ARGV[5] endpoint, ARGV[6] its time, ARGV[7] '1' when permanent, ARGV[8] the
  failure's JSON. Each endpoint's run is four fields of the hash startfail (<ep>:n, :first,
  :perm, :last). Returns {attempts, first, perm}.

  Keys, under the prefix ARGV[1] (none is passed in KEYS): startfail
]]
local k, ep = P .. 'startfail', ARGV[5]
local attempts = redis.call('HINCRBY', k, ep .. ':n', 1)
redis.call('HSETNX', k, ep .. ':first', ARGV[6])
if ARGV[7] == '1' then redis.call('HSET', k, ep .. ':perm', '1') end
redis.call('HSET', k, ep .. ':last', ARGV[8])
pub('start-failures') -- topics.startFailures (store-events.ts)
return {attempts, redis.call('HGET', k, ep .. ':first'), redis.call('HGET', k, ep .. ':perm') or '0'}
