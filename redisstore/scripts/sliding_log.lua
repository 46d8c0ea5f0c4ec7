-- sliding_log.lua: the sliding log as (instant, count) entries, as
-- algorithm.SlidingLog keeps it: a request is one entry, or joins the newest
-- entry when both lie in one slot of time, so a call is O(entries) work and
-- a key holds a bounded number of entries, whatever the rate and the cost.
--
-- KEYS[1]  a string, MessagePack of the flat array {sum, instant1, count1,
--          instant2, count2, ...}: the units of the entries, then the
--          entries oldest first, instants in microseconds and strictly
--          increasing (an entry's instant is the latest of its units'); at
--          most ARGV[7] entries
-- ARGV[1]  mode: "take", "refund" or "peek" (see prelude.lua)
-- ARGV[2]  now in microseconds, or ""         (see prelude.lua)
-- ARGV[3]  period P in microseconds
-- ARGV[4]  rate: units per period
-- ARGV[5]  cost
-- ARGV[6]  slot S in microseconds: the units admitted within one
--          epoch-aligned slot of S share an entry (S = 1: the same instant)
-- ARGV[7]  the most entries the log keeps; beyond, the two oldest merge
--
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}; for a
-- refund {1, 0, 0, 0}. A request is admitted when the units logged in
-- (now−P, now] plus cost are at most rate. An entry leaves the window whole,
-- at its instant + P. The key expires when its newest entry leaves.
local P = tonumber(ARGV[3])
local rate = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
local S = tonumber(ARGV[6])
local most = tonumber(ARGV[7])
local key = KEYS[1]

local raw = redis.call('GET', key)
local log = {0}
if raw then
  log = cmsgpack.unpack(raw)
end
-- Entry i is log[2i] (its instant) and log[2i+1] (its count); sum is log[1].
-- at is the instant logged: never before the newest, so that the log stays
-- ordered if the clock steps back.
local at = now
if #log > 1 and log[#log - 1] > now then
  at = log[#log - 1]
end
-- The entries at or before now − P have left the window; they are the
-- oldest. Drop them.
local dropped = false
while #log > 1 and log[2] <= now - P do
  log[1] = log[1] - log[3]
  table.remove(log, 2)
  table.remove(log, 2)
  dropped = true
end
local sum = log[1]
local live = (#log - 1) / 2

-- save writes the log, to expire when the newest entry leaves the window,
-- or deletes the key when no entry is left.
local function save()
  if not write then
    return
  end
  if #log < 3 then
    redis.call('DEL', key)
    return
  end
  redis.call('SET', key, cmsgpack.pack(log), 'PX', int(math.ceil((log[#log - 1] + P - now) / 1000)))
end

if mode == 'refund' then
  -- Remove cost units from the oldest live entries, as
  -- algorithm.SlidingLog.Refund does: the units kept then carry instants no
  -- earlier than the real ones, so no window holds more than rate. An entry
  -- that keeps some keeps its instant.
  local c = math.min(cost, sum)
  log[1] = sum - c
  while c > 0 do
    if log[3] > c then
      log[3] = log[3] - c
      c = 0
    else
      c = c - log[3]
      table.remove(log, 2)
      table.remove(log, 2)
    end
  end
  save()
  return {1, 0, 0, 0}
end

if cost > rate - sum then
  -- Wait until enough of the oldest entries have left the window (cost ≤
  -- rate, so they exist). The entries that have left are dropped for good,
  -- as the memory store drops them, should the clock step back.
  local need, i = sum + cost - rate, 2
  while need > log[i + 1] do
    need = need - log[i + 1]
    i = i + 2
  end
  if dropped then
    save()
  end
  return {0, math.max(rate - sum, 0), log[i] + P - now, log[#log - 1] + P - now}
end

if mode == 'peek' then -- within the limit: nothing to log
  if live == 0 then
    return {1, rate, 0, 0}
  end
  return {1, rate - sum, 0, log[#log - 1] + P - now}
end

-- math.fmod is exact on integers below 2^53, where % (a − floor(a/b)·b)
-- may round.
log[1] = sum + cost
local newest = log[#log - 1]
if live > 0 and (newest == at or at - math.fmod(at, S) == newest - math.fmod(newest, S)) then
  log[#log - 1], log[#log] = at, log[#log] + cost
else
  if live >= most then
    -- Only after a change of limit or a clock that stepped back: merge the
    -- two oldest entries, keeping the later instant.
    log[5] = log[3] + log[5]
    table.remove(log, 2)
    table.remove(log, 2)
  end
  log[#log + 1] = at
  log[#log + 1] = cost
end
save()
return {1, rate - sum - cost, 0, at + P - now}
