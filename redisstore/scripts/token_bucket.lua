-- token_bucket.lua: GCRA, the one-timestamp form of a token bucket.
--
-- KEYS[1]  the key's theoretical arrival time (TAT): "<µs>" or "<µs>.<nnn>",
--          microseconds since the epoch and, if any, nanoseconds beyond them
-- ARGV[1]  mode: "take", "refund", "peek" (see prelude.lua) or "charge":
--          spend c units whether or not they fit, pushing TAT past a full
--          bucket's span (a debt) up to two spans from now, then answer as
--          "peek" would
-- ARGV[2]  now in microseconds, or ""         (see prelude.lua)
-- ARGV[3]  emission interval T, in the unit ARGV[6] names
-- ARGV[4]  burst B
-- ARGV[5]  cost c
-- ARGV[6]  "ns": T is algorithm.Interval in nanoseconds, as the memory store
--          keeps it, and B·T is below 2^52 ns, so the arithmetic below,
--          relative to now, stays exact in nanoseconds; "us": T is rounded
--          up to microseconds (never admit more), for longer refills
--
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}, waits
-- rounded up to microseconds; for a refund {1, 0, 0, 0}. A request is
-- admitted when max(TAT, now) + c·T − now ≤ B·T. The key expires when the
-- bucket is full again.
local T = tonumber(ARGV[3])
local B = tonumber(ARGV[4])
local c = tonumber(ARGV[5])
local ns = ARGV[6] == 'ns'
local unit = 1 -- microseconds per unit of T
if ns then
  unit = 1000
end

-- d is TAT − now in the unit of T, exact: whole microseconds, then the
-- nanoseconds beyond them. A TAT before now is a full bucket; in "us" a
-- TAT with nanoseconds rounds up.
local d = 0
local raw = redis.call('GET', KEYS[1])
if raw then
  local us, frac = string.match(raw, '^(%d+)%.?(%d*)$')
  local whole = tonumber(us) - now
  frac = tonumber(frac) or 0
  if whole >= 0 then
    if ns then
      d = whole * 1000 + frac
    elseif frac > 0 then
      d = whole + 1
    else
      d = whole
    end
  end
end

-- ceilus returns x, a duration in the unit of T, in microseconds, rounded up.
local function ceilus(x)
  if x <= 0 then
    return 0
  end
  local y = x + unit - 1
  return (y - math.fmod(y, unit)) / unit
end

-- save stores TAT = now + x, x > 0 in the unit of T, to expire when the
-- bucket is full again, or deletes the key when x ≤ 0.
local function save(x)
  if not write then
    return
  end
  if x <= 0 then
    redis.call('DEL', KEYS[1])
    return
  end
  local r = math.fmod(x, unit)
  local v = int(now + (x - r) / unit)
  if r > 0 then
    v = v .. string.format('.%03d', r)
  end
  redis.call('SET', KEYS[1], v, 'PX', int(math.ceil(ceilus(x) / 1000)))
end

-- floordiv returns ⌊x/T⌋ for x ≥ 0.
local function floordiv(x)
  return (x - math.fmod(x, T)) / T
end

if mode == 'refund' then
  save(d - c * T)
  return {1, 0, 0, 0}
end

local span = B * T
if mode == 'charge' then
  -- Whole units that fit below two spans; c is capped first so that c·T
  -- stays below 2^53 (B·T is below 2^52 in "ns", see above).
  local add = math.min(c, 2 * B, floordiv(math.max(2 * span - d, 0)))
  d = d + add * T
  save(d)
  c = 0
end
local nxt = d + c * T
if nxt > span then
  return {0, floordiv(math.max(span - d, 0)), ceilus(nxt - span), ceilus(d)}
end
save(nxt)
return {1, floordiv(math.max(span - nxt, 0)), 0, ceilus(nxt)}
