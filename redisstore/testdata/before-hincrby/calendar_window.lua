-- calendar_window.lua: a fixed window over calendar periods (a month in a
-- time zone, a day of 23 or 25 hours). Redis has no zone data, so the Go
-- side computes the periods (package calendar) around its own clock and
-- sends three boundaries; the script picks the period that holds its own
-- now, so a host clock a little off from Redis's still counts in Redis's
-- period. The state is fixed_window.lua's, in the same key.
--
-- KEYS[1]  a hash: e = end of the counted period (microseconds), n = count
-- ARGV[1]  mode: "take", "refund" or "peek" (see prelude.lua)
-- ARGV[2]  now in microseconds, or ""         (see prelude.lua)
-- ARGV[3]  s: the start of the host's current period, in microseconds
-- ARGV[4]  rate: units per period
-- ARGV[5]  cost c
-- ARGV[6]  e1: the end of the host's current period (the next one's start)
-- ARGV[7]  e2: the end of the next period
--
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}; for a
-- refund {1, 0, 0, 0}. The key expires at the end of its period.
local s = tonumber(ARGV[3])
local rate = tonumber(ARGV[4])
local c = tonumber(ARGV[5])
local e1 = tonumber(ARGV[6])
local e2 = tonumber(ARGV[7])
local st = redis.call('HMGET', KEYS[1], 'e', 'n')
local e = tonumber(st[1] or '0')
local n = tonumber(st[2] or '0')

-- The end of the period that holds now: the previous period ends at s.
local want = e2
if now < s then
  want = s
elseif now < e1 then
  want = e1
end

-- Whether now is decided in the stored period: it holds now, or it follows
-- the one that does (the clock stepped back less than a period), as in
-- algorithm.FixedWindow. Moving back would lose the previous period's count,
-- and this one would start afresh when the clock came back.
local stay = e == want or n > 0 and ((want == s and e == e1) or (want == e1 and e == e2))

if mode == 'refund' then
  return window_refund(KEYS[1], n, c, now < e and stay)
end

if now >= e then -- a new period
  e = want
  n = 0
elseif not stay then
  -- The clock went back more than a period, or the calendar changed: move
  -- to the period that holds now but keep the count, conservatively;
  -- written even if the take is denied, as in fixed_window.lua.
  e = want
  if write then
    redis.call('HSET', KEYS[1], 'e', int(e))
  end
end
return window_take(KEYS[1], e, n, rate, c)
