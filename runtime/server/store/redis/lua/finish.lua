--[[
  A worker's result: `kind` output or error, `payload` its JSON or '', `pieces` how many stream
  chunks the output is when it is the job's stream (0: it is not), `cost` in units of 1e-10 or
  ''. Answers the ended job (reply(), its output left out: it is `payload`) once final, nil when it is
  not this worker's running job (a repeat, or another worker's), {'error', why} for a bad
  argument (checked before the first write: Redis does not roll a failed script back).

  Run as finish (one call: one-call.lua) or finishBatch (several: batch.lua).

  Keys, under the prefix ARGV[1] (none is passed in KEYS): dl, dl:*, dlseq, exp, job:*, ls:*, run, st:*, usage:cost, usage:jobs, wact, wjobs:*
]]
local function finish(w, id, kind, payload, pieces, cost)
  -- Its input is neither read nor answered: nothing reads it once the job has ended.
  local j = jobButInput(id)
  if not live(j) or j.status ~= 'IN_PROGRESS' or j.worker ~= w then return nil end
  pieces = tonumber(pieces)
  if not pieces then return {'error', 'pieces is not a number'} end
  if cost ~= '' and not tonumber(cost) then return {'error', 'cost is not a number'} end
  local failed = kind == 'error'
  unrun(j)
  drop(j, {'output', 'error'})
  local fields = {}
  if payload ~= '' then fields = {kind, payload} end
  -- A job that streamed nothing has its output as its stream (ochunk): its pieces are cut from
  -- the output when read (outputPieces), never written a second time as a chunk list.
  if tonumber(j.chunks) == 0 and pieces > 0 then
    fields[#fields + 1] = 'ochunk'; fields[#fields + 1] = '1'
    fields[#fields + 1] = 'chunks'; fields[#fields + 1] = n(pieces)
  end
  redis.call('ZADD', P .. 'wact', now, w)
  if not failed and cost ~= '' and j.key and j.key ~= '' then
    local uk = j.key .. '\n' .. j.ep
    redis.call('HINCRBY', P .. 'usage:jobs', uk, 1)
    redis.call('HINCRBY', P .. 'usage:cost', uk, cost)
  end
  ended(j, failed and 'FAILED' or 'COMPLETED', fields)
  -- The output is the payload the caller sent: it is not sent back; nor is the input.
  return reply(j, true, true)
end

local call, arity = finish, 6
