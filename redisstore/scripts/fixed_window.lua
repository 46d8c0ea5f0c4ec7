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
-- refund {1, 0, 0, 0}. The key expires at the end of its window.
local P = tonumber(ARGV[3])
local rate = tonumber(ARGV[4])
local c = tonumber(ARGV[5])
local st = redis.call('HMGET', KEYS[1], 'e', 'n')
local e = tonumber(st[1] or '0')
local n = tonumber(st[2] or '0')

if mode == 'refund' then
  return window_refund(KEYS[1], n, c, now < e)
end

if now >= e then -- a new window
  e = now - now % P + P
  n = 0
elseif e - now > P then
  -- The clock went back or the period shrank: move to the window that holds
  -- now but keep the count, conservatively.
  e = now - now % P + P
end
if mode == 'charge' then
  n = overcount(n, c, rate)
  redis.call('HSET', KEYS[1], 'e', int(e), 'n', int(n))
  expire(KEYS[1], e - now)
  c = 0
end
return window_take(KEYS[1], e, n, rate, c)
