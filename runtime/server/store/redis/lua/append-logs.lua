--[[
  ARGV[5] worker, ARGV[6] job, ARGV[7] the log's limit in bytes, ARGV[8] the cut line's JSON, then
  pairs of (a line's bytes, its JSON). Returns -1 when the job is not running on that worker, 1
  when its log is cut (now or before), else 0. A job's lines are the list log:<id> (JSON texts),
  its bytes and whether it reached its limit the hash logm:<id>; both go with the job (remove()).

  Keys, under the prefix ARGV[1] (none is passed in KEYS): job:*, log:*, logm:*
]]
local v = redis.call('HMGET', jk(ARGV[6]), 'status', 'worker', 'expires')
if v[1] ~= 'IN_PROGRESS' or v[2] ~= ARGV[5] or tonumber(v[3]) <= now then return -1 end
local mk = P .. 'logm:' .. ARGV[6]
local m = redis.call('HMGET', mk, 'bytes', 'cut')
if m[2] == '1' then return 1 end
if #ARGV < 9 then return 0 end
local used, max = tonumber(m[1] or '0'), tonumber(ARGV[7])
local keep, cut = {}, false
for i = 9, #ARGV, 2 do
  local b = tonumber(ARGV[i])
  if used + b > max then
    keep[#keep + 1] = ARGV[8]
    cut = true
    break
  end
  used = used + b
  keep[#keep + 1] = ARGV[i + 1]
end
rpush(P .. 'log:' .. ARGV[6], keep)
redis.call('HSET', mk, 'bytes', n(used), 'cut', cut and '1' or '0')
pub('job:' .. ARGV[6])
return cut and 1 or 0
