/**
 * Scripts of jobs' log lines (run inside PRELUDE ... EPILOGUE of redis-lua-prelude.ts). A job's
 * lines are the list `log:<id>` (JSON texts), its bytes and whether it reached its limit the
 * hash `logm:<id>`; both go with the job (remove()).
 */
export const LOG_SCRIPTS = {
  /**
   * ARGV5 worker, ARGV6 job, ARGV7 the log's limit in bytes, ARGV8 the cut line's JSON, then pairs
   * of (a line's bytes, its JSON). Returns -1 when the job is not running on that worker, 1 when
   * its log is cut (now or before), else 0.
   */
  appendLogs: `
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
return cut and 1 or 0`,

  /** ARGV5 endpoint, ARGV6 job, ARGV7 first line. Returns {'1' when cut else '0', line JSON...}, or nil. */
  readLogs: `
local v = redis.call('HMGET', jk(ARGV[6]), 'ep', 'expires')
if v[1] ~= ARGV[5] or tonumber(v[2]) <= now then return nil end
local lines = redis.call('LRANGE', P .. 'log:' .. ARGV[6], tonumber(ARGV[7]), -1)
table.insert(lines, 1, redis.call('HGET', P .. 'logm:' .. ARGV[6], 'cut') or '0')
return lines`,
};
