-- sliding_log.lua: the sliding log as (instant, count) entries, as
-- algorithm.SlidingLog keeps it: a request is one entry, or joins the newest
-- entry when both lie in one slot of time, so a call is O(entries) work and
-- a key holds a bounded number of entries, whatever the rate and the cost.
--
-- KEYS[1]  a sorted set, one member per entry: score = the latest instant of
--          the entry's units in microseconds, member = "<instant>:<count>".
--          Instants are strictly increasing, so members are unique.
-- ARGV[1]  mode: "take" or "refund"          (see prelude.lua)
-- ARGV[2]  now in microseconds, or ""         (see prelude.lua)
-- ARGV[3]  period P in microseconds
-- ARGV[4]  rate: units per period
-- ARGV[5]  cost
-- ARGV[6]  slot S in microseconds: the units admitted within one
--          epoch-aligned slot of S share an entry (S = 1: the same instant)
-- ARGV[7]  the most entries the set keeps; beyond, the two oldest merge
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

local function member(t, n)
  return int(t) .. ':' .. int(n)
end

-- One read of the whole log (at most `most` entries), oldest first.
local log = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
local m = #log / 2
-- at is the instant logged: never before the newest, so that the log stays
-- ordered if the clock steps back.
local at = now
if m > 0 and tonumber(log[2 * m]) > now then
  at = tonumber(log[2 * m])
end
-- The entries at or before now − P have left the window; they are the
-- oldest. The rest are live: names, instants, counts and their sum.
local names, times, counts = {}, {}, {}
local live, sum = 0, 0
for i = 1, m do
  local t = tonumber(log[2 * i])
  if t > now - P then
    live = live + 1
    names[live], times[live] = log[2 * i - 1], t
    counts[live] = tonumber(string.match(log[2 * i - 1], ':(%d+)$'))
    sum = sum + counts[live]
  end
end
if live < m then
  redis.call('ZREMRANGEBYRANK', key, 0, m - live - 1)
end

if mode == 'refund' then
  -- Remove cost units from the newest entries; an entry that keeps some
  -- keeps its instant.
  local c = cost
  while c > 0 and live > 0 do
    redis.call('ZREM', key, names[live])
    if counts[live] > c then
      redis.call('ZADD', key, int(times[live]), member(times[live], counts[live] - c))
      c = 0
    else
      c = c - counts[live]
      live = live - 1
    end
  end
  if live > 0 then
    expire(key, times[live] + P - now)
  end
  return {1, 0, 0, 0}
end

if sum + cost > rate then
  -- Wait until enough of the oldest entries have left the window (cost ≤
  -- rate, so they exist).
  local need, i = sum + cost - rate, 1
  while need > counts[i] do
    need = need - counts[i]
    i = i + 1
  end
  return {0, math.max(rate - sum, 0), times[i] + P - now, times[live] + P - now}
end

-- math.fmod is exact on integers below 2^53, where % (a − floor(a/b)·b)
-- may round.
local function slot(t)
  return t - math.fmod(t, S)
end
if live > 0 and (times[live] == at or slot(times[live]) == slot(at)) then
  redis.call('ZREM', key, names[live])
  redis.call('ZADD', key, int(at), member(at, counts[live] + cost))
else
  if live >= most then
    -- Only after a change of limit or a clock that stepped back: merge the
    -- two oldest entries, keeping the later instant.
    redis.call('ZREM', key, names[1], names[2])
    redis.call('ZADD', key, int(times[2]), member(times[2], counts[1] + counts[2]))
  end
  redis.call('ZADD', key, int(at), member(at, cost))
end
expire(key, at + P - now)
return {1, rate - sum - cost, 0, at + P - now}
