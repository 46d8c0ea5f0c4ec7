-- fixed_window.lua: a counter per epoch-aligned window.
--
-- KEYS[1]  a hash: e = end of the counted window (microseconds), n = count
-- ARGV[1]  mode: "take", "refund", "peek" (see prelude.lua) or "charge":
--          count c units in the window past the rate if need be (up to
--          twice it), then answer as "peek" would
-- ARGV[2]  now in microseconds, or ""         (see prelude.lua)
-- ARGV[3]  period P in microseconds
-- ARGV[4]  rate: units per window
-- ARGV[5]  cost c
--
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}; for a
-- refund {1, 0, 0, 0}. The key expires at the end of its window: the
-- expiry is written when a window starts (or moves), and an admitted take
-- in the window the key holds adds to the count alone (HINCRBY). The
-- layout is the previous releases', which wrote e, n and the expiry on
-- every admitted take: a key either wrote is decided alike by both.
local P = tonumber(ARGV[3])
local rate = tonumber(ARGV[4])
local c = tonumber(ARGV[5])
local st = redis.call('HMGET', KEYS[1], 'e', 'n')
local e = tonumber(st[1] or '0')
local n = tonumber(st[2] or '0')

if mode == 'refund' then
  -- Only to the window that holds now, or the one after it (a clock that
  -- stepped back), as algorithm.FixedWindow refunds.
  return window_refund(KEYS[1], n, c, now < e and e - now <= 2 * P)
end

-- held: the key holds the window that holds now, and its expiry (see
-- window_take); not when a window starts or moves.
local held = true
if now >= e then -- a new window
  e = now - now % P + P
  n = 0
  held = false
elseif e - now > P and (n == 0 or e - now > 2 * P) then
  -- The clock went back more than a period, or the period shrank: move to
  -- the window that holds now but keep the count, conservatively. A
  -- smaller step back stays in this window if it counts anything, as
  -- algorithm.FixedWindow does: moving would lose the previous window's
  -- count, and this one would start afresh when the clock came back. The
  -- move is written even if the take is denied, as algorithm.FixedWindow
  -- keeps it: where the window is decides whether a later step back stays.
  e = now - now % P + P
  held = false
  if write then
    redis.call('HSET', KEYS[1], 'e', int(e))
  end
end
if mode == 'charge' then
  n = overcount(n, c, rate)
  redis.call('HSET', KEYS[1], 'e', int(e), 'n', int(n))
  expire(KEYS[1], e - now)
  c = 0
  held = true
end
return window_take(KEYS[1], e, n, rate, c, held)
