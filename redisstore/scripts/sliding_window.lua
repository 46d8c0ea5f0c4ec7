-- sliding_window.lua: the sliding window counter.
--
-- KEYS[1]  a hash: s = start of the current window (microseconds),
--          p = units in the previous window, c = units in the current one
-- KEYS[2]  optional: the key of the same caller key under moments
--          (sliding_moments.lua's), in the same hash slot: read while
--          KEYS[1] does not exist, then deleted (see "seed" below)
-- ARGV[1]  mode: "take", "refund", "peek" (see prelude.lua) or "charge":
--          count cost units in the current window past the rate if need
--          be (up to twice it), then answer as "peek" would
-- ARGV[2]  now in microseconds, or ""         (see prelude.lua)
-- ARGV[3]  period P in microseconds
-- ARGV[4]  rate: units per period
-- ARGV[5]  cost
-- ARGV[6]  "1" to count rejected requests too, else "0"
--
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}; for a
-- refund {1, 0, 0, 0}. A request is admitted when
-- floor(prev·(P−elapsed)/P) + curr + cost ≤ rate. The key expires when no
-- counted unit weighs on the estimate any more.
local P = tonumber(ARGV[3])
local rate = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
local countRejected = ARGV[6] == '1'
local st = redis.call('HMGET', KEYS[1], 's', 'p', 'c')
local start = tonumber(st[1] or '0')
local prev = tonumber(st[2] or '0')
local curr = tonumber(st[3] or '0')

-- Move to the window that holds now.
local w = now - now % P
if w == start + P then
  prev, curr, start = curr, 0, w
elseif w > start then
  prev, curr, start = 0, 0, w
elseif w == start - P and (prev > 0 or curr > 0) then
  -- The clock stepped back into the previous window: stay, and now counts
  -- as the window's start (elapsed clamps at 0 below, prev weighs fully).
  -- Moving back would make prev stand for the window before it, weighing
  -- nearly nothing, and the next roll forward would forget it.
elseif w < start then
  -- The clock went back more than a period: keep the counts,
  -- conservatively, and move the window.
  start = w
end

-- momentsEstimate returns the units a state kept by sliding_moments.lua
-- (the array m, see there) counts at now under its own layout, k
-- sub-windows of G and d means, as algorithm.SlidingMoments.Estimate
-- computes them: the k newest sub-windows whole and the oldest one's
-- estimated share, in the same integer arithmetic. Units of sub-windows
-- out of the period count none. A state whose sub-window is not P/k, or a
-- clock gone back more than a period, keeps every unit, as that script
-- would.
local function momentsEstimate(m)
  local ms, k, d, pin, G = m[1], m[2], m[3], m[4], m[5]
  local ONE, LEVELS, MEAN = 16384, 8192, 128
  local function slot(j)
    return floor_mod(j, k + 1)
  end
  local total = 0
  for j = 0, k do
    total = total + m[6 + j]
  end
  if G ~= P / k then
    return total
  end
  local start = now - floor_mod(now, G)
  if ms > start then
    if ms - now > P then
      return total -- the clock went back more than a period
    end
    start = ms -- back less than a period: stay, elapsed 0
  end
  local cur, n = ms / G, start / G
  if n - cur > k then
    local hold = m[6 + (k + 1) * (d + 1) + d + 1] or 0
    if hold > now then
      return total
    end
    return 0
  end
  local whole = 0
  for j = n - k + 1, cur do
    whole = whole + m[6 + slot(j)]
  end
  local old = slot(n - k)
  local w = m[6 + old]
  if w == 0 then
    return whole
  end
  if pin == old + 1 then
    return whole + w
  end
  local means = {}
  for x = 1, d do
    if n - k == cur then -- closed by this roll: its sums, rounded
      local sum = m[6 + (k + 1) * (d + 1) + x]
      means[x] = math.min(math.max(math.floor((2 * sum * MEAN + w * ONE) / (2 * w * ONE)), -127), 127)
    else
      means[x] = m[6 + k + 1 + old * d + x]
    end
  end
  local z = 4 * muldiv(math.max(now - start, 0), LEVELS, G) + 2 - ONE
  local p = {[0] = ONE, [1] = z}
  for j = 1, d do
    local num = (2 * j + 1) * z * p[j] - j * p[j - 1] * ONE
    local q = math.floor((2 * num + (j + 1) * ONE) / 32768)
    p[j + 1] = math.min(math.max(math.floor(q / (j + 1)), -ONE), ONE)
  end
  local t = MEAN * (ONE - p[1])
  for j = 1, d do
    t = t + (p[j - 1] - p[j + 1]) * means[j]
  end
  local all = 2 * ONE * MEAN
  t = math.min(math.max(t, 0), all)
  return whole + math.floor((w * t + all / 2) / all)
end

-- A key kept under moments (the rule's layout changed back, buckets: 1):
-- the units moments count now (momentsEstimate), in the current window, as
-- arrived now: whole until it ends, then fading. Nothing moments still
-- count is forgotten, and nothing they let go counts again; the moments
-- key goes.
if not st[1] and KEYS[2] then
  local raw = redis.call('GET', KEYS[2])
  if raw then
    curr = curr + momentsEstimate(cmsgpack.unpack(raw))
    if write then
      redis.call('DEL', KEYS[2])
    end
  end
end

local function save()
  local untl = 0
  if curr > 0 then
    untl = start + 2 * P
  elseif prev > 0 then
    untl = start + P
  end
  if not write then -- a peek: the reset only
  elseif untl <= now then
    redis.call('DEL', KEYS[1])
  else
    redis.call('HSET', KEYS[1], 's', int(start), 'p', int(prev), 'c', int(curr))
    expire(KEYS[1], untl - now)
  end
  return math.max(untl - now, 0)
end

if mode == 'refund' then
  curr = math.max(curr - cost, 0)
  save()
  return {1, 0, 0, 0}
end

if mode == 'charge' then
  curr = overcount(curr, cost, rate)
  cost = 0
end

local elapsed = math.max(now - start, 0)
local weighted = muldiv(prev, P - elapsed, P)
local allowed = 1
local retry = 0
-- As a difference, so that no sum passes 2^53 (rate may be 2^53).
if cost > rate - curr - weighted then
  allowed = 0
  if countRejected then
    -- The count stops at 2^53, where a double stops counting exactly;
    -- only a client that sent 10^15 requests could tell.
    curr = math.min(curr + cost, 9007199254740992)
  end
  -- Within this window the previous window's weight falls; failing that,
  -- wait for the next window, where today's count becomes the previous one.
  local k = rate - cost - curr
  if k >= 0 and prev > 0 then
    -- k < weighted ≤ prev here, so the quotient is at most P.
    local e = P - muldivceil(k + 1, P, prev) + 1
    if e < P then
      retry = math.max(start + e - now, 1)
    end
  end
  if retry == 0 then
    retry = start + P - now
    -- With rate − cost + 1 > curr the quotient passes P: nothing to add.
    if curr > 0 and rate - cost + 1 <= curr then
      retry = retry + P - muldivceil(rate - cost + 1, P, curr) + 1
    end
  end
else
  curr = curr + cost
end
local reset = save()
return {allowed, math.max(rate - weighted - curr, 0), retry, reset}
