-- sliding_moments.lua: the sliding window counter with k sub-windows per
-- period that also keep d means of their arrivals' offsets, as
-- algorithm.SlidingMoments keeps it, in the same integer arithmetic, so
-- that both stores make the same decisions.
--
-- KEYS[1]  a string, MessagePack of the flat array
--          {s, k, d, pin, G, c0..ck, m0_1..m0_d, ..., mk_1..mk_d, S1..Sd}:
--          s = start of the current sub-window (microseconds), k and d the
--          sub-windows and means the state is kept for, pin 1 + the index of
--          a sub-window whose units count whole until it leaves (0: none),
--          G the sub-window's length (microseconds), ci the units of the
--          sub-window whose number (its start ÷ G) is i mod (k+1), mi_j its
--          j-th mean (an integer of −127..127, in 128ths) once it has
--          closed, and Sj the current sub-window's sums of its arrivals'
--          polynomial values (in 16384ths); index 7+k holds 0 (so that the
--          array has no hole and packs as one), and a last element U, when
--          present, is a hold: the instant (microseconds) until which the
--          units counted before the clock stepped back more than a period
--          weigh, should the clock come forward again
-- KEYS[2]  the two-window counter's key of the same caller key (a hash, as
--          sliding_window.lua keeps it), in the same hash slot: read while
--          KEYS[1] does not exist, then deleted (see "seed" below)
-- ARGV[1]  mode: "take", "refund" or "peek" (see prelude.lua)
-- ARGV[2]  now in microseconds, or ""         (see prelude.lua)
-- ARGV[3]  period P in microseconds
-- ARGV[4]  rate: units per period (at most 10,000)
-- ARGV[5]  cost
-- ARGV[6]  "1" to count rejected requests too, else "0"
-- ARGV[7]  k, the number of sub-windows: P is a multiple of it
-- ARGV[8]  d, the number of means, 1 to 8
--
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}; for a
-- refund {1, 0, 0, 0}. The estimate is algorithm.SlidingMoments's: every
-- number below stays under 2^53 (the largest, a count times a clamped
-- share, under 2^38), and each floor of a quotient is exact (a quotient of
-- integers below 2^40 by a divisor below 2^33 is never within a rounding
-- of an integer it is not).
local P = tonumber(ARGV[3])
local rate = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
local countRejected = ARGV[6] == '1'
local k = tonumber(ARGV[7])
local d = tonumber(ARGV[8])
local G = P / k
local key = KEYS[1]
local ONE, LEVELS, MEAN, MAXC = 16384, 8192, 128, 65535

local function slot(j)
  return floor_mod(j, k + 1)
end

local function clamp(x, lo, hi)
  return math.min(math.max(x, lo), hi)
end

-- legendre returns the values of the Legendre polynomials P0..P(d+1) at
-- z, in 16384ths, as algorithm's legendre computes them.
local function legendre(z)
  local p = {[0] = ONE, [1] = z}
  for j = 1, d do
    local num = (2 * j + 1) * z * p[j] - j * p[j - 1] * ONE
    local q = math.floor((2 * num + (j + 1) * ONE) / 32768)
    p[j + 1] = clamp(math.floor(q / (j + 1)), -ONE, ONE)
  end
  return p
end

-- level returns the offset level of e microseconds into a sub-window.
local function level(e)
  return (muldiv(e, LEVELS, G))
end

local function levelZ(x)
  return 4 * x + 2 - ONE
end

local start = now - floor_mod(now, G)
local n = start / G
local i = slot(n)

local counts, means, sums, pin = {}, {}, {}, 0
for j = 0, k do
  counts[j] = 0
  means[j] = {}
  for m = 1, d do
    means[j][m] = 0
  end
end
for m = 1, d do
  sums[m] = 0
end

-- closedMean rounds a sub-window's sum to a mean in 128ths.
local function closedMean(sum, w)
  if w == 0 then
    return 0
  end
  return clamp(math.floor((2 * sum * MEAN + w * ONE) / (2 * w * ONE)), -127, 127)
end

-- add counts c units at the current offset, whose polynomials' values are
-- p, and returns how many were counted (fewer at the count's bound).
local function add(c, p)
  local before = counts[i]
  local added = math.min(before + c, MAXC) - before
  counts[i] = before + added
  for m = 1, d do
    sums[m] = sums[m] + added * p[m]
  end
  return added
end

local HOLD = 6 + (k + 1) * (d + 1) + d + 1
local hold = 0 -- see U above; kept while the state counts anything

-- addTotal counts every unit of a stored state st of sk sub-windows in the
-- current sub-window, as arrived at its end and pinned.
local function addTotal(st, sk)
  local total = 0
  for j = 0, sk do
    total = total + st[6 + j]
  end
  if total > 0 then
    add(total, legendre(levelZ(LEVELS - 1)))
    pin = i + 1
  end
end

local raw = redis.call('GET', key)
if not raw and KEYS[2] then
  -- A key the two-window counter kept (the rule's layout changed, as when
  -- the default moved from buckets 1 to moments): its estimate now,
  -- sliding_window.lua's, counted in the current sub-window, pinned, so
  -- that it counts whole until that sub-window leaves the period. Nothing
  -- the counter counted is forgotten; the counter's key goes.
  local old = redis.call('HMGET', KEYS[2], 's', 'p', 'c')
  local ostart = tonumber(old[1] or '0')
  local oprev = tonumber(old[2] or '0')
  local ocurr = tonumber(old[3] or '0')
  local w = now - math.fmod(now, P)
  if w == ostart + P then
    oprev, ocurr, ostart = ocurr, 0, w
  elseif w > ostart then
    oprev, ocurr, ostart = 0, 0, w
  elseif w < ostart - P then
    -- The clock went back more than a period: the counts kept, the window
    -- moved, as sliding_window.lua rolls it.
    ostart = w
  end -- else back into the previous window: the counts whole, elapsed 0
  local units = muldiv(oprev, P - math.max(now - ostart, 0), P) + ocurr
  if units > 0 then
    add(units, legendre(levelZ(LEVELS - 1)))
    pin = i + 1
  end
  if write and old[1] then
    redis.call('DEL', KEYS[2])
  end
end
if raw then
  local st = cmsgpack.unpack(raw)
  local sk, sd = st[2], st[3]
  local same = sk == k and sd == d and st[5] == G
  if same and st[1] > start and st[1] - now <= P then
    -- The clock stepped back less than a period: stay in the stored
    -- sub-window, and now counts as its start (elapsed clamps at 0
    -- below). Moving back would pin its units in an earlier sub-window,
    -- which the clock coming forward would drop.
    start = st[1]
    n = start / G
    i = slot(n)
  end
  if not same or st[1] > start then
    -- Another k, d or sub-window, or the clock went back more than a
    -- period: keep every unit, in the current sub-window, as arrived at
    -- its end and pinned. After a step back the state holds them until
    -- they would stop weighing had the clock not stepped.
    if same then
      hold = st[HOLD] or 0
      local cur = st[1] / G
      for j = cur, cur - k, -1 do
        if st[6 + slot(j)] ~= 0 then
          hold = math.max(hold, (j + 1) * G + P)
          break
        end
      end
    end
    addTotal(st, sk)
  else
    hold = st[HOLD] or 0
    local cur = st[1] / G
    if n - cur > k and hold > now then
      -- Past the period, but back from a step back before the units
      -- counted then stop weighing: keep them.
      addTotal(st, sk)
    elseif n - cur <= k then
      pin = st[4]
      for j = 0, k do
        counts[j] = st[6 + j]
        for m = 1, d do
          means[j][m] = st[6 + k + 1 + j * d + m]
        end
      end
      for m = 1, d do
        sums[m] = st[6 + (k + 1) * (d + 1) + m]
      end
      if n > cur then
        -- Close the sub-window the state was in; clear the ones since.
        local c = slot(cur)
        for m = 1, d do
          means[c][m] = closedMean(sums[m], counts[c])
          sums[m] = 0
        end
        for j = cur + 1, n do
          counts[slot(j)] = 0
          if pin == slot(j) + 1 then
            pin = 0
          end
        end
      end
    end
  end
end

-- meansOf returns the means of sub-window j: stored once it has closed,
-- rounded from the sums for the current one.
local function meansOf(j)
  if j ~= i then
    return means[j]
  end
  local out = {}
  for m = 1, d do
    out[m] = closedMean(sums[m], counts[j])
  end
  return out
end

-- weight returns the estimate of the units of w, with means m, still
-- inside the period, at the offset whose polynomials' values are p.
local function weight(w, m, p)
  if w == 0 then
    return 0
  end
  local t = MEAN * (ONE - p[1])
  for j = 1, d do
    t = t + (p[j - 1] - p[j + 1]) * m[j]
  end
  local whole = 2 * ONE * MEAN
  t = clamp(t, 0, whole)
  return math.floor((w * t + whole / 2) / whole)
end

-- save writes the state, to expire when the newest sub-window with units
-- stops weighing (a period after its end), and returns the time until then.
local function save()
  local untl = 0
  if hold <= start + P + G then
    hold = 0 -- not beyond what the sub-windows give: no hold
  end
  for j = n, n - k, -1 do
    if counts[slot(j)] ~= 0 then
      untl = math.max((j + 1) * G + P, hold)
      break
    end
  end
  if not write then -- a peek: the reset only
  elseif untl <= now then
    redis.call('DEL', key)
  else
    local out = {start, k, d, pin, G}
    out[7 + k] = 0
    for j = 0, k do
      out[6 + j] = counts[j]
      for m = 1, d do
        out[6 + k + 1 + j * d + m] = means[j][m]
      end
    end
    for m = 1, d do
      out[6 + (k + 1) * (d + 1) + m] = sums[m]
    end
    if untl > start + P + G then
      out[HOLD] = untl
    end
    redis.call('SET', key, cmsgpack.pack(out))
    expire(key, untl - now)
  end
  return math.max(untl - now, 0)
end

local p = legendre(levelZ(level(math.max(now - start, 0)))) -- before start: the clock stepped back
if mode == 'refund' then
  local before = counts[i]
  local after = math.max(before - cost, 0)
  counts[i] = after
  if after == 0 and pin == i + 1 then
    pin = 0
  end
  if after ~= before then
    -- The means stay: the sums scale by after/before, rounded down (the
    -- product is below 2^47, exact).
    for m = 1, d do
      sums[m] = math.floor(sums[m] * after / before)
    end
  end
  save()
  return {1, 0, 0, 0}
end

-- ERR[j] bounds legendre's rounding of P_j at every level (in 16384ths;
-- algorithm's momentsErr).
local ERR = {[0] = 0, 0, 1, 2, 2, 3, 4, 6, 6, 7}
local STRIDE = LEVELS / 16

-- fitsFrom returns the first instant from `from` on, in the sub-window
-- that begins at base, at which the weight of sub-window j (w units) is at
-- most room, or nil: exactly, as algorithm.SlidingMoments's fitSearch
-- finds it (see there why the bounds hold). It searches the indices at
-- which a decision can differ: levels, or microseconds when a sub-window
-- has fewer of them than levels.
local function fitsFrom(j, w, room, base, from)
  if pin == j + 1 then
    return nil
  end
  local m = meansOf(j)
  local WHOLE = 2 * ONE * MEAN
  -- t ≤ T exactly when the weight is within room; e, l, h bound the
  -- rounding, the slope and the curvature.
  local T = math.floor(((room + 1) * WHOLE - WHOLE / 2 - 1) / w)
  local e, l, h = 0, 4 * MEAN, 0
  for x = 1, d do
    local a = math.abs(m[x])
    e = e + a * (ERR[x - 1] + ERR[x + 1])
    l = l + 4 * (2 * x + 1) * a
    h = h + 8 * (2 * x + 1) * x * (x + 1) * a
  end
  local function lvl(u)
    if G >= LEVELS then
      return u
    end
    return level(u)
  end
  local function t(u)
    local p = legendre(levelZ(lvl(u)))
    local v = MEAN * (ONE - p[1])
    for x = 1, d do
      v = v + (p[x - 1] - p[x + 1]) * m[x]
    end
    return v
  end
  -- within returns the first index in (a, b] that fits, or nil, given t
  -- there: ta (above T) and tb.
  local function within(a, ta, b, tb)
    local r = lvl(b) - lvl(a)
    local bound = math.max(math.floor((ta + tb - l * r) / 2),
      math.min(ta, tb) - math.floor((h * r * r + 8 * ONE - 1) / (8 * ONE)))
    if bound - 2 * e > T then
      return nil
    end
    if b - a == 1 then
      if tb <= T then
        return b
      end
      return nil
    end
    local c = a + math.floor((b - a) / 2)
    local tc = t(c)
    local u = within(a, ta, c, tc)
    if u then
      return u
    end
    return within(c, tc, b, tb)
  end
  local n, a = math.min(G, LEVELS), from - base
  if G >= LEVELS then
    a = level(a)
  end
  local b = n - 1
  local ta = t(a)
  local u = nil
  if ta <= T then
    u = a
  end
  while not u and a < b do
    local c = math.min((math.floor(a / STRIDE) + 1) * STRIDE, b)
    local tc = t(c)
    u = within(a, ta, c, tc)
    a, ta = c, tc
  end
  if not u then
    return nil
  end
  if G >= LEVELS then
    return math.max(base + muldivceil(u, G, LEVELS), from)
  end
  return base + u
end

local whole = 0
for j = n - k + 1, n do
  whole = whole + counts[slot(j)]
end
local old = slot(n - k)
local oldest = counts[old]
local weighted = 0
if pin == old + 1 then
  weighted = oldest
elseif oldest ~= 0 then
  weighted = weight(oldest, meansOf(old), p)
end
local allowed = 1
local retry = 0
if weighted + whole + cost > rate then
  allowed = 0
  if countRejected then
    whole = whole + add(cost, p)
  end
  -- The first of this sub-window and the next k+1 in which the request
  -- fits: sub-windows leave the period one by one.
  local w = whole
  for step = 0, k + 1 do
    local j, ow = -1, 0
    if step == 0 then
      j = old
      ow = counts[j]
    elseif step <= k then
      j = slot(n - k + step)
      ow = counts[j]
      w = w - ow
    end
    local room = rate - cost - w
    if room >= 0 then
      local base = start + step * G
      local from = base
      if step == 0 then
        from = math.max(now, base)
      end
      local t
      if ow <= room then
        t = from
      else
        t = fitsFrom(j, ow, room, base, from)
      end
      if t then
        retry = math.max(t - now, 1)
        break
      end
    end
  end
else
  whole = whole + add(cost, p)
end
local reset = save()
return {allowed, math.max(rate - weighted - whole, 0), retry, reset}
