-- sliding_buckets.lua: the sliding window counter with k sub-windows per
-- period, as algorithm.SlidingBuckets keeps it.
--
-- KEYS[1]  a string, MessagePack of the flat array {s, k, c0, c1, ..., ck}:
--          s = start of the current sub-window (microseconds), k the
--          number of sub-windows the counts are kept for, and ci the units
--          of the sub-window whose number (its start ÷ G) is i mod (k+1),
--          for the current sub-window and the k before it
-- ARGV[1]  mode: "take", "refund" or "peek" (see prelude.lua)
-- ARGV[2]  now in microseconds, or ""         (see prelude.lua)
-- ARGV[3]  period P in microseconds
-- ARGV[4]  rate: units per period
-- ARGV[5]  cost
-- ARGV[6]  "1" to count rejected requests too, else "0"
-- ARGV[7]  k, the number of sub-windows: P is a multiple of it
--
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}; for a
-- refund {1, 0, 0, 0}. With G = P/k and n the number of the current
-- sub-window, a request is admitted when
-- floor(c(n−k)·(G−elapsed)/G + 1/2) + c(n−k+1) + … + c(n) + cost ≤ rate. The key
-- expires when no counted unit weighs on the estimate any more.
local P = tonumber(ARGV[3])
local rate = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
local countRejected = ARGV[6] == '1'
local k = tonumber(ARGV[7])
local G = P / k
local key = KEYS[1]

-- slot returns the index in counts of sub-window j, for any j: the number
-- of an older sub-window than the epoch's first is negative, and math.fmod
-- keeps the sign.
local function slot(j)
  return floor_mod(j, k + 1)
end

-- The current sub-window: its start and number, exactly (floor_mod is),
-- before the Unix epoch too (where math.fmod is negative).
local start = now - floor_mod(now, G)
local n = start / G
local counts = {}
for i = 0, k do
  counts[i] = 0
end
local raw = redis.call('GET', key)
if raw then
  local st = cmsgpack.unpack(raw)
  if st[2] == k and st[1] > start and st[1] - now <= P and math.fmod(st[1], G) == 0 then
    -- The clock stepped back less than a period: stay in the stored
    -- sub-window, and now counts as its start (elapsed clamps at 0
    -- below). Moving back would move its units back too, and they would
    -- leave the period early when the clock returned.
    start = st[1]
    n = start / G
    for i = 0, k do
      counts[i] = st[3 + i]
    end
  elseif st[2] ~= k or st[1] > start then
    -- Another k, or the clock went back more than a period: keep every
    -- unit, in the current sub-window. Conservative: nothing counted is
    -- forgotten.
    local total = 0
    for i = 3, #st do
      total = total + st[i]
    end
    counts[slot(n)] = math.min(total, 4294967295)
  elseif n - st[1] / G <= k then
    for i = 0, k do
      counts[i] = st[3 + i]
    end
    for j = st[1] / G + 1, n do
      counts[slot(j)] = 0
    end
  end
end

-- save writes the counts, to expire when the newest sub-window with units
-- stops weighing (a period after its end), and returns the time until then.
local function save()
  local untl = 0
  for j = n, n - k, -1 do
    if counts[slot(j)] ~= 0 then
      untl = (j + 1) * G + P
      break
    end
  end
  if not write then -- a peek: the reset only
  elseif untl <= now then
    redis.call('DEL', key)
  else
    local out = {start, k}
    for i = 0, k do
      out[3 + i] = counts[i]
    end
    redis.call('SET', key, cmsgpack.pack(out))
    expire(key, untl - now)
  end
  return math.max(untl - now, 0)
end

local i = slot(n)
if mode == 'refund' then
  counts[i] = math.max(counts[i] - cost, 0)
  save()
  return {1, 0, 0, 0}
end

-- parts returns the units counted whole and those of the oldest
-- sub-window, counted in part, as seen d sub-windows from now.
local function parts(d)
  local whole = 0
  for j = math.max(n + d - k + 1, n - k + 1), n do
    whole = whole + counts[slot(j)]
  end
  local oldest = 0
  if d <= k then
    oldest = counts[slot(n + d - k)]
  end
  return whole, oldest
end

local elapsed = math.max(now - start, 0) -- before start: the clock stepped back
local whole, oldest = parts(0)
-- The oldest sub-window's share, rounded to the nearest (half up), as
-- algorithm.SlidingBuckets's oldWeight does.
local function oldweight(w, left)
  if w == 0 then
    return 0
  end
  return math.floor((muldiv(2 * w, left, G) + 1) / 2)
end
local weighted = oldweight(oldest, G - elapsed)
local allowed = 1
local retry = 0
if cost > rate - whole - weighted then
  allowed = 0
  if countRejected then
    whole = whole - counts[i]
    counts[i] = math.min(counts[i] + cost, 4294967295)
    whole = whole + counts[i]
  end
  -- The first of this sub-window and the next k+1 in which the estimate
  -- falls low enough: sub-windows leave the period one by one, and the
  -- oldest one's weight falls within each.
  for d = 0, k + 1 do
    local w, old = parts(d)
    local room = rate - cost - w
    if room >= 0 then
      local from = 0
      if d == 0 then
        from = elapsed
      end
      local at = from
      if oldweight(old, G - from) > room then
        -- floor(old·(G−e)/G + 1/2) ≤ room from
        -- e = G − ceil((2·room+1)·G/(2·old)) + 1
        local e = G - muldivceil(2 * room + 1, G, 2 * old) + 1
        if e < G then
          at = math.max(e, from)
        else
          at = nil
        end
      end
      if at then
        retry = math.max(start + d * G + at - now, 1)
        break
      end
    end
  end
else
  counts[i] = counts[i] + cost
  whole = whole + cost
end
local reset = save()
return {allowed, math.max(rate - weighted - whole, 0), retry, reset}
