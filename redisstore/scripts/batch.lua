-- batch.lua: several decisions of one algorithm in one call (see
-- coalesce.go). The store loads it with the marker line --PRELUDE-- below
-- replaced by prelude.lua's helpers (the part above its --DECISION--
-- line), defined once per call, and decide's marker line by the rest of
-- prelude.lua and the algorithm's script, which so become the body of
-- decide: each decision runs it with its own KEYS and ARGV, exactly as the
-- algorithm's own script would run alone, one after the other.
--
-- KEYS      one key per decision, or two (a script whose KEYS[2] is the
--           key it seeds a missing one from: sliding_moments.lua), in the
--           order of the decisions, all in one hash slot
-- ARGV[1]   s, the number of arguments of each decision
-- ARGV[2..] the decisions' arguments, s of them each, in the same order
--
-- Reply: four elements per decision, in the order of KEYS: the algorithm's
-- reply, or an error reply and three zeros for a decision that failed (its
-- writes before the failure stay, as they would alone; the others are
-- made all the same).
local batchKeys, batchArgv = KEYS, ARGV
--PRELUDE--
local function decide(KEYS, ARGV)
--DECIDE--
end

local s = tonumber(batchArgv[1])
local out = {}
-- The decisions that read the server's clock (an empty instant) read it
-- once for all: they are made in one atomic call, so at one instant.
local serverNow
-- One KEYS and one ARGV table for every decision, refilled each time: no
-- script keeps either past its return.
local keys, argv = {}, {}
local n = (#batchArgv - 1) / s
local kn = #batchKeys / n -- keys per decision
for i = 1, n do
  for j = 1, kn do
    keys[j] = batchKeys[(i - 1) * kn + j]
  end
  local base = 1 + (i - 1) * s
  for j = 1, s do
    argv[j] = batchArgv[base + j]
  end
  if argv[2] == '' then
    if not serverNow then
      local t = redis.call('TIME')
      serverNow = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
    argv[2] = serverNow -- a number: prelude.lua's tonumber keeps it
  end
  local ok, r = pcall(decide, keys, argv)
  local at = (i - 1) * 4
  if ok and type(r) == 'table' and r.err == nil and #r == 4 then
    out[at + 1], out[at + 2], out[at + 3], out[at + 4] = r[1], r[2], r[3], r[4]
  else
    local msg = 'batch: decision ' .. i .. ': unexpected reply'
    if type(r) == 'table' and r.err then
      msg = r.err
    elseif not ok then
      msg = tostring(r)
    end
    out[at + 1], out[at + 2], out[at + 3], out[at + 4] = redis.error_reply(msg), 0, 0, 0
  end
end
return out
