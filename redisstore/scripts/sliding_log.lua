-- sliding_log.lua: the sliding log as (instant, count) entries, as
-- algorithm.SlidingLog keeps it: a request is one entry, or joins the newest
-- entry when both lie in one slot of time, so a call is O(entries) work and
-- a key holds a bounded number of entries, whatever the rate and the cost.
--
-- KEYS[1]  a string, MessagePack of the flat array {instant1, count1,
--          instant2, count2, ...}, oldest first, instants in microseconds
--          and strictly increasing (an entry's instant is the latest of its
--          units'); at most ARGV[7] entries
-- ARGV[1]  mode: "take" or "refund"          (see prelude.lua)
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
local log = {}
if raw then
  log = cmsgpack.unpack(raw)
end
local m = #log / 2
-- at is the instant logged: never before the newest, so that the log stays
-- ordered if the clock steps back.
local at = now
if m > 0 and log[2 * m - 1] > now then
  at = log[2 * m - 1]
end
-- The entries at or before now − P have left the window; they are the
-- oldest. Copy the live ones, oldest first, and sum their units.
local times, counts = {}, {}
local live, sum = 0, 0
for i = 1, m do
  local t = log[2 * i - 1]
  if t > now - P then
    live = live + 1
    times[live], counts[live] = t, log[2 * i]
    sum = sum + counts[live]
  end
end

-- save writes the live entries from first on, to expire when the newest
-- leaves the window, or deletes the key when none is left.
local function save(first)
  if live < first then
    redis.call('DEL', key)
    return
  end
  local out = {}
  for i = first, live do
    out[#out + 1] = times[i]
    out[#out + 1] = counts[i]
  end
  redis.call('SET', key, cmsgpack.pack(out), 'PX', int(math.ceil((times[live] + P - now) / 1000)))
end

if mode == 'refund' then
  -- Remove cost units from the newest entries; an entry that keeps some
  -- keeps its instant.
  local c = cost
  while c > 0 and live > 0 do
    if counts[live] > c then
      counts[live], c = counts[live] - c, 0
    else
      c = c - counts[live]
      live = live - 1
    end
  end
  save(1)
  return {1, 0, 0, 0}
end

if sum + cost > rate then
  -- Wait until enough of the oldest entries have left the window (cost ≤
  -- rate, so they exist). The entries that have left are dropped for good,
  -- as the memory store drops them, should the clock step back.
  local need, i = sum + cost - rate, 1
  while need > counts[i] do
    need = need - counts[i]
    i = i + 1
  end
  if live < m then
    save(1)
  end
  return {0, math.max(rate - sum, 0), times[i] + P - now, times[live] + P - now}
end

-- math.fmod is exact on integers below 2^53, where % (a − floor(a/b)·b)
-- may round.
local first = 1
if live > 0 and (times[live] == at or at - math.fmod(at, S) == times[live] - math.fmod(times[live], S)) then
  times[live], counts[live] = at, counts[live] + cost
else
  if live >= most then
    -- Only after a change of limit or a clock that stepped back: merge the
    -- two oldest entries, keeping the later instant.
    counts[2] = counts[1] + counts[2]
    first = 2
  end
  live = live + 1
  times[live], counts[live] = at, cost
end
save(first)
return {1, rate - sum - cost, 0, at + P - now}
